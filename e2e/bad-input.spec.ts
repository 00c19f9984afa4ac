import { expect, test, type APIRequestContext } from "@playwright/test";

/**
 * Hostile input through the real server: each is refused with a 4xx problem naming what is wrong
 * (never a 500 carrying database text), and nothing is stored.
 */

async function planCount(request: APIRequestContext): Promise<number> {
  const response = await request.get("/api/trpc/plans.list");
  const body = await response.json();
  return (body.result.data.json as unknown[]).length;
}

const create = (planJson: string) => ({ json: { planJson } });
const plan = (steps: unknown[], goal = "bad input") => JSON.stringify({ goal, steps });

test("deep nesting, NUL, lone surrogates and prototype keys are refused with the field named", async ({ request }) => {
  const before = await planCount(request);
  const deepArgs = `{"goal":"deep","steps":[{"id":"step_1","tool":"echo","args":{"value":${"[".repeat(10_000)}${"]".repeat(10_000)}}}]}`;
  const cases: { name: string; body: string; field: RegExp }[] = [
    {
      name: "10,000-deep arguments inside the plan JSON",
      body: JSON.stringify(create(deepArgs)),
      field: /nested more than 64/,
    },
    {
      name: "10,000-deep tRPC input",
      body: `{"json":{"planJson":${"[".repeat(10_000)}${"]".repeat(10_000)}}}`,
      field: /nested more than 64/,
    },
    {
      name: "NUL in a goal",
      body: JSON.stringify(create(plan([{ id: "step_1", tool: "echo", args: {} }], "a\u0000b"))),
      field: /goal contains a NUL/,
    },
    {
      name: "NUL in a step id",
      body: JSON.stringify(create(plan([{ id: "step\u0000", tool: "echo", args: {} }]))),
      field: /steps\.0\.id contains a NUL/,
    },
    {
      name: "a lone surrogate in an argument key",
      body: `{"json":{"planJson":${JSON.stringify(`{"goal":"g","steps":[{"id":"step_1","tool":"echo","args":{"k\\ud800":1}}]}`)}}}`,
      field: /unpaired surrogate/,
    },
    {
      name: "a lone surrogate in the goal of the tRPC input itself",
      body: `{"json":{"planJson":"x","goal":"\\udc00"}}`,
      field: /unpaired surrogate/,
    },
    {
      name: "a constructor key in arguments",
      body: JSON.stringify(create(plan([{ id: "step_1", tool: "echo", args: { constructor: { value: 1 } } }]))),
      field: /constructor/,
    },
    {
      name: "a __proto__ key",
      body: `{"json":{"planJson":${JSON.stringify('{"goal":"g","steps":[{"id":"step_1","tool":"echo","args":{"__proto__":{"x":1}}}]}')}}}`,
      field: /__proto__/,
    },
  ];
  for (const { name, body, field } of cases) {
    const response = await request.post("/api/trpc/plans.createFromJson", {
      data: body,
      headers: { "content-type": "application/json" },
    });
    // 400 when the request itself is unsafe, 422 (invalid plan) when the plan JSON inside it is.
    expect([400, 422], `${name}: ${response.status()}`).toContain(response.status());
    const text = await response.text();
    expect(text, name).toMatch(field);
    expect(text, name).not.toMatch(/prisma|postgres|invalid byte sequence|Maximum call stack/i);
  }
  expect(await planCount(request)).toBe(before);
});

test("a batch of 1,000 calls and a body over 1 MB are refused", async ({ request }) => {
  const paths = Array.from({ length: 1_000 }, () => "plans.list").join(",");
  const input = JSON.stringify(Object.fromEntries(Array.from({ length: 1_000 }, (_, i) => [i, {}])));
  const batch = await request.get(`/api/trpc/${paths}?batch=1&input=${encodeURIComponent(input)}`);
  expect(batch.status()).toBeGreaterThanOrEqual(400);
  expect(batch.status()).toBeLessThan(500);
  const small = await request.get(
    `/api/trpc/plans.list,plans.list?batch=1&input=${encodeURIComponent('{"0":{},"1":{}}')}`,
  );
  expect(small.status()).toBe(200);

  const before = await planCount(request);
  const huge = JSON.stringify(create(plan([{ id: "step_1", tool: "echo", args: { value: "x".repeat(1_100_000) } }])));
  const response = await request.post("/api/trpc/plans.createFromJson", {
    data: huge,
    headers: { "content-type": "application/json" },
  });
  expect(response.status()).toBe(413);
  expect(response.headers()["content-type"]).toContain("application/problem+json");
  expect(await planCount(request)).toBe(before);
});

test("path parameters and query numbers are screened through the real routes: 400 problem+json, never a 500", async ({
  request,
}) => {
  const planId = await request
    .post("/api/trpc/plans.createFromJson", {
      data: create(plan([{ id: "step_1", tool: "echo", args: { value: 1 } }], "screened")),
    })
    .then(async (response) => (await response.json()).result.data.json.id as string);
  const cases: { path: string; method?: "GET" | "POST"; parameter?: string }[] = [
    { path: "/api/runs/not-a-uuid", parameter: "runId" },
    { path: "/api/runs/not-a-uuid/decide", method: "POST", parameter: "runId" },
    { path: `/api/plan/${planId}?version=99999999999999999999`, parameter: "version" },
    { path: `/api/plan/${planId}?version=1.5`, parameter: "version" },
    { path: `/api/plan/${"p".repeat(101)}/versions`, parameter: "planId" },
    // NUL and other control characters in any path parameter, encoded or not, stop at the door.
    { path: "/api/runs/abc%00def" },
    { path: `/api/plan/${planId}%00/runs` },
    { path: "/api/ops/plan.get%00", method: "POST" },
    { path: "/runs/abc%00def" },
    { path: "/api/plan/a%1Fb" },
  ];
  for (const { path, method = "GET", parameter } of cases) {
    const response =
      method === "POST"
        ? await request.post(path, { data: { stepId: "step_1", approve: true } })
        : await request.get(path);
    const text = await response.text();
    expect(response.status(), `${method} ${path}: ${text}`).toBe(400);
    expect(response.headers()["content-type"]).toContain("application/problem+json");
    if (parameter) expect(JSON.parse(text).details.issues[0].path, path).toEqual([parameter]);
    expect(text).not.toMatch(/prisma|postgres|invalid input syntax|out of range/i);
  }
  expect((await request.get(`/api/plan/${planId}?version=1`)).status()).toBe(200);
});
