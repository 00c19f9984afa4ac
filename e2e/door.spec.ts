import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs";
import { createServer, request as httpRequest } from "node:http";
import type { AddressInfo } from "node:net";
import { chromium, expect, test, type APIRequestContext, type Browser } from "@playwright/test";
import { startRunViaApi } from "./pages/run-pages";
import { query } from "./pages/trpc-api";
import { E2E_PORT, extraAppPort } from "./e2e-env";

/**
 * The door, tried as an attacker would from a real browser: a DNS-rebinding page (a hostname that
 * resolves to 127.0.0.1, so its requests reach Stepwise under the attacker's name) and a plain
 * cross-site page both try to create and approve a plan with a shell step; then a second server
 * with an access token shows every route kind needs it and the sign-in page grants it.
 */

const port = E2E_PORT;
const attackGoal = `attack ${Date.now()}`;
const attackPlan = JSON.stringify({
  goal: attackGoal,
  steps: [{ id: "step_1", tool: "shell", args: { command: "touch /tmp/stepwise-pwned" } }],
});

/** A Chromium that resolves attacker.test to 127.0.0.1, as a rebound DNS name would. */
async function rebindingBrowser(): Promise<Browser> {
  const bundled = chromium.executablePath();
  const executablePath =
    bundled && fs.existsSync(bundled)
      ? undefined
      : ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((candidate) => fs.existsSync(candidate));
  return chromium.launch({
    executablePath,
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--host-resolver-rules=MAP attacker.test 127.0.0.1",
      // Chromium's own local-network protections would stop the page before it reaches the
      // server; switch them off so the test shows what the server does on its own.
      "--disable-features=LocalNetworkAccessChecks,PrivateNetworkAccessRespectPreflightResults,BlockInsecurePrivateNetworkRequests,PrivateNetworkAccessSendPreflights",
    ],
  });
}

async function plansWithGoal(request: APIRequestContext, goal: string): Promise<number> {
  const response = await request.get(`/api/trpc/plans.list`);
  expect(response.ok()).toBe(true);
  return JSON.stringify(await response.json()).split(goal).length - 1;
}

/** What the attacker's page runs: create, then approve through every way a page can send a request. */
const attackScript = (base: string, plan: string) => `
  void (async () => {
    const results = [];
    const send = async (path, body, init = {}) => {
      try {
        const response = await fetch("${base}" + path, { method: "POST", body, ...init });
        results.push(path + " " + response.status);
      } catch (error) {
        results.push(path + " failed");
      }
    };
    const create = JSON.stringify({ json: { goal: "x", planJson: ${JSON.stringify(plan)} } });
    await send("/api/trpc/plans.createFromJson", create, { headers: { "content-type": "application/json" } });
    await send("/api/trpc/plans.createFromJson", create, { mode: "no-cors", headers: { "content-type": "text/plain" } });
    const form = document.createElement("form");
    form.method = "POST";
    form.action = "${base}/api/trpc/plans.createFromJson";
    form.enctype = "text/plain";
    const field = document.createElement("input");
    field.name = '{"json":{"goal":"x","planJson":' + JSON.stringify(${JSON.stringify(plan)}) + ',"pad":"';
    field.value = '"}}';
    form.appendChild(field);
    document.body.appendChild(form);
    window.__results = results;
    form.submit();
  })();
`;

test("a DNS-rebinding page cannot create, approve or decide anything", async ({ request }) => {
  const browser = await rebindingBrowser();
  try {
    const page = await browser.newPage();
    const origin = `http://attacker.test:${port}`;
    // The attacker's page itself; after "rebinding" its same-origin requests reach Stepwise.
    await page.route(`${origin}/`, (route) =>
      route.fulfill({ contentType: "text/html", body: "<!doctype html><title>cats</title><body>cats</body>" }),
    );
    await page.goto(`${origin}/`);
    const status = await page.evaluate(async () => {
      const response = await fetch("/api/trpc/plans.list");
      return response.status;
    });
    expect(status).toBe(403);
    const approve = await page.evaluate(async () => {
      const response = await fetch("/api/trpc/plans.approve", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ json: { planId: "00000000-0000-0000-0000-000000000000", version: 1 } }),
      });
      return response.status;
    });
    expect(approve).toBe(403);
    // Last, the create attempts, ending in a form post that navigates the page away.
    await Promise.all([
      page.waitForURL("**/api/trpc/plans.createFromJson"),
      page.evaluate(attackScript("", attackPlan)),
    ]);
    expect(await page.content()).toContain("Unknown host");
  } finally {
    await browser.close();
  }
  expect(await plansWithGoal(request, attackGoal)).toBe(0);
});

test("a request from another site's page is refused for its Origin alone; the same request from here passes", async ({
  request,
}) => {
  const goal = `origin check ${Date.now()}`;
  const data = {
    json: { planJson: JSON.stringify({ goal, steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }] }) },
  };
  const foreign = await request.post("/api/trpc/plans.createFromJson", {
    data,
    headers: { origin: "http://attacker.test:9", "sec-fetch-site": "cross-site" },
  });
  expect(foreign.status()).toBe(403);
  expect(foreign.headers()["content-type"]).toContain("application/problem+json");
  const foreignNoFetchMetadata = await request.post("/api/trpc/plans.createFromJson", {
    data,
    headers: { origin: "http://attacker.test:9" },
  });
  expect(foreignNoFetchMetadata.status()).toBe(403);
  expect(await plansWithGoal(request, goal)).toBe(0);
  const local = await request.post("/api/trpc/plans.createFromJson", {
    data,
    headers: { origin: `http://127.0.0.1:${port}` },
  });
  expect(local.status()).toBe(200);
  expect(await plansWithGoal(request, goal)).toBe(1);
});

/**
 * What a page on another port of this machine (a dev server, a notebook, a docs preview showing
 * an attacker's content) sends with the person's signed-in browser: the session cookie is
 * SameSite=Strict, but another port is the same *site*, so the cookie travels. Origin (with its
 * port), Sec-Fetch-Site and the JSON-only rule must stop every form and no-cors request.
 */
const otherPortAttack = (base: string, runId: string, attackPlan: string) => `
  void (async () => {
    const results = [];
    const targets = [
      ["/api/trpc/runs.decide", { json: { runId: "${runId}", stepId: "step_1", approve: true } }],
      ["/api/ops/run.decide", { runId: "${runId}", stepId: "step_1", approve: true }],
      ["/api/runs/${runId}/decide", { stepId: "step_1", approve: true }],
      ["/api/trpc/runs.pause", { json: { runId: "${runId}" } }],
      ["/api/trpc/plans.createFromJson", { json: { planJson: ${JSON.stringify(attackPlan)} } }],
    ];
    for (const [path, body] of targets) {
      for (const init of [
        { mode: "no-cors", headers: { "content-type": "text/plain" } },
        { mode: "no-cors", headers: { "content-type": "application/x-www-form-urlencoded" } },
        { mode: "no-cors" },
        { mode: "cors", headers: { "content-type": "application/json" } },
      ]) {
        try {
          const response = await fetch("${base}" + path, { method: "POST", credentials: "include", body: JSON.stringify(body), ...init });
          results.push(path + " " + init.mode + " " + response.status);
        } catch (error) {
          results.push(path + " " + init.mode + " failed");
        }
      }
    }
    window.__results = results;
    // Last, a plain form post, as any page can send: it navigates to the server's answer.
    const form = document.createElement("form");
    form.method = "POST";
    form.action = "${base}/api/trpc/runs.decide";
    form.enctype = "text/plain";
    const field = document.createElement("input");
    field.name = '{"json":{"runId":"${runId}","stepId":"step_1","approve":true,"pad":"';
    field.value = '"}}';
    form.appendChild(field);
    document.body.appendChild(form);
    form.submit();
  })();
`;

test("a page on another port of 127.0.0.1 cannot approve a gated step or change anything with the person's cookie", async ({
  page,
  request,
}) => {
  const goal = `other port ${Date.now()}`;
  const runId = await startRunViaApi(request, goal, {
    steps: [{ id: "step_1", tool: "write_file", args: { path: "other-port.txt", content: "written" } }],
  });
  type Run = { status: string; steps: { stepId: string; status: string }[] };
  const stepStatus = async () => (await query<Run>(request, "runs.get", { runId })).steps[0]!.status;
  await expect.poll(stepStatus).toBe("awaiting_approval");

  const attacker = createServer((_req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>notes</title><body>notes</body>"),
  );
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
  const attackerOrigin = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  try {
    await page.goto(`${attackerOrigin}/`);
    const formPost = page.waitForRequest(
      (sent) => sent.url().endsWith("/api/trpc/runs.decide") && sent.isNavigationRequest(),
    );
    await Promise.all([
      page.waitForURL(`http://127.0.0.1:${port}/api/trpc/runs.decide`),
      page.evaluate(otherPortAttack(`http://127.0.0.1:${port}`, runId, attackPlan)),
    ]);
    // The person's cookie went along (another port is the same site): the server refused anyway.
    expect((await (await formPost).allHeaders()).cookie ?? "").toContain("stepwise_session=");
    await expect(page.locator("body")).toContainText(/Cross-origin request|Origin not allowed/);
  } finally {
    attacker.closeAllConnections();
    await new Promise((resolve) => attacker.close(resolve));
  }
  // Nothing changed: the step still waits for the person, the run is not paused, no plan was made.
  expect(await stepStatus()).toBe("awaiting_approval");
  expect((await query<Run>(request, "runs.get", { runId })).status).not.toBe("paused");
  expect(await plansWithGoal(request, attackGoal)).toBe(0);
  // The same approval from the app's own origin goes through: the refusal above was the origin's.
  const own = await request.post("/api/trpc/runs.decide", {
    data: { json: { runId, stepId: "step_1", approve: true } },
    headers: { origin: `http://127.0.0.1:${port}`, "sec-fetch-site": "same-origin" },
  });
  expect(own.status()).toBe(200);
  await expect.poll(stepStatus).not.toBe("awaiting_approval");
});

/** Streams a chunked body (no Content-Length) until the server answers; resolves with its status. */
function streamChunked(
  url: string,
  headers: Record<string, string>,
  total: number,
): Promise<{ status?: number; sent: number }> {
  const piece = Buffer.alloc(64 * 1024, "a");
  return new Promise((resolve) => {
    let sent = 0;
    let status: number | undefined;
    const req = httpRequest(url, { method: "POST", headers: { "content-type": "application/json", ...headers } });
    req.on("response", (response) => {
      status = response.statusCode;
      response.resume();
      response.on("end", () => resolve({ status, sent }));
    });
    req.on("error", () => setTimeout(() => resolve({ status, sent }), 200));
    const write = () => {
      while (status === undefined && sent < total) {
        sent += piece.length;
        if (!req.write(piece)) return void req.once("drain", write);
      }
      if (sent >= total) req.end();
    };
    write();
  });
}

test("a 200 MB chunked body is cut at 1 MB with 413 through the real server, which stays responsive", async ({
  request,
}) => {
  const cookies = (await request.storageState()).cookies.filter((cookie) => cookie.name === "stepwise_session");
  const cookie = cookies.map((entry) => `${entry.name}=${entry.value}`).join("; ");
  for (const path of ["/api/trpc/plans.createFromJson", "/api/ops/plan.get", "/api/plan"]) {
    const result = await streamChunked(`http://127.0.0.1:${port}${path}`, { cookie }, 200 * 1024 * 1024);
    expect(result.status, path).toBe(413);
    expect(result.sent, path).toBeLessThan(200 * 1024 * 1024);
    const alive = await request.get("/api/trpc/plans.list");
    expect(alive.status()).toBe(200);
  }
});

test.describe("with an access token", () => {
  const token = "e2e-access-token-0123456789";
  let base = "";
  let server: ChildProcess | undefined;

  test.beforeAll(async () => {
    test.setTimeout(120_000);
    const tokenPort = await extraAppPort("E2E_TOKEN_APP_PORT");
    base = `http://127.0.0.1:${tokenPort}`;
    server = spawn(process.execPath, ["--import", "tsx", "e2e/serve-for-tests.ts"], {
      env: { ...process.env, PORT: String(tokenPort), STEPWISE_ACCESS_TOKEN: token, NEXT_TELEMETRY_DISABLED: "1" },
      stdio: "ignore",
      detached: true,
    });
    const deadline = Date.now() + 110_000;
    for (;;) {
      const status = await fetch(`${base}/api/trpc/plans.list`).then(
        (response) => response.status,
        () => 0,
      );
      if (status === 401) break;
      if (Date.now() > deadline) throw new Error(`the token server did not start (last status ${status})`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  });

  test.afterAll(async () => {
    // serve-for-tests stops its server, removes its database and folders, then exits.
    const exited = new Promise((resolve) =>
      server?.exitCode !== null ? resolve(undefined) : server.on("exit", resolve),
    );
    server?.kill("SIGTERM");
    await exited;
  });

  test("every route kind refuses a request without the token and answers one with it", async () => {
    const routes: { method: string; path: string; headers?: Record<string, string>; body?: string }[] = [
      { method: "GET", path: "/api/trpc/plans.list" },
      {
        method: "POST",
        path: "/api/trpc/plans.createFromJson",
        body: JSON.stringify({ json: { planJson: attackPlan } }),
        headers: { "content-type": "application/json" },
      },
      {
        method: "GET",
        path: "/api/trpc/runs.events?input=%7B%22json%22%3A%7B%22runId%22%3A%22x%22%7D%7D",
        headers: { accept: "text/event-stream" },
      },
      { method: "GET", path: "/api/no-such-route" },
    ];
    for (const route of routes) {
      const anonymous = await fetch(base + route.path, {
        method: route.method,
        headers: route.headers,
        body: route.body,
      });
      expect(anonymous.status, `${route.method} ${route.path}`).toBe(401);
      expect(anonymous.headers.get("content-type")).toContain("application/problem+json");
      const wrong = await fetch(base + route.path, {
        method: route.method,
        headers: { ...route.headers, authorization: "Bearer not-the-token" },
        body: route.body,
      });
      expect(wrong.status).toBe(401);
    }
    const withToken = await fetch(`${base}/api/trpc/plans.list`, { headers: { authorization: `Bearer ${token}` } });
    expect(withToken.status).toBe(200);
    // The plan posted without the token was not stored.
    expect(JSON.stringify(await withToken.json())).not.toContain(attackGoal);
    // A client-supplied identity header is not believed: still refused.
    const forged = await fetch(`${base}/api/trpc/plans.list`, { headers: { "x-stepwise-identity": "e30.e30" } });
    expect(forged.status).toBe(401);
  });

  test("a browser is sent to the sign-in page, a wrong token is refused, the right one opens the app", async ({
    page,
  }) => {
    await page.goto(`${base}/runs`);
    await expect(page).toHaveURL(`${base}/sign-in`);
    await expect(page.getByRole("heading", { name: "Sign in to Stepwise" })).toBeVisible();
    await page.getByLabel("Access token").fill("wrong");
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page.getByRole("alert")).toContainText("not right");
    await page.getByLabel("Access token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await expect(page).toHaveURL(`${base}/`);
    const cookies = await page.context().cookies(base);
    const session = cookies.find((cookie) => cookie.name === "stepwise_session")!;
    expect(session.httpOnly).toBe(true);
    expect(session.sameSite).toBe("Strict");
    expect(session.value).not.toContain(token);
    await page.goto(`${base}/runs`);
    // The page's own tRPC calls pass with the cookie: the list loads.
    await expect(page.getByRole("heading", { name: "Runs" })).toBeVisible();
    await expect(page.getByText("No runs yet")).toBeVisible();
    await expect(page).toHaveURL(`${base}/runs`);
  });
});
