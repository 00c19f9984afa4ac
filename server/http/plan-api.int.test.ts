import { getEventListeners } from "node:events";
import fs from "node:fs/promises";
import path from "node:path";
import { EventSource } from "eventsource";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { goodPlan } from "../../tests/planner-fixtures";
import { startScriptedLlm } from "../../tests/scripted-llm";
import { z } from "zod";
import { readPlannerConfig } from "../planner/config";
import { createPlannerDeps, installPlanner } from "../planner/deps";
import { openApiDocument } from "./openapi";
import { sseStream } from "./plan-api";

/**
 * Seed 001's HTTP API with plain clients: fetch for JSON, and the `eventsource` package for SSE,
 * against the handlers behind the real door, on a real database with a real worker.
 */
const AGENT_TOKEN = "plan-api-agent-token";
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;

afterEach(async () => {
  await api?.close();
  await harness?.close();
  api = undefined;
  harness = undefined;
});

async function start() {
  harness = await startHarness();
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  return api.url;
}

const sleeps = (count: number, ms: number) =>
  Array.from({ length: count }, (_, index) => ({
    id: `step_${index + 1}`,
    title: `Sleep ${index + 1}`,
    tool: "sleep",
    args: { ms },
    dependsOn: index === 0 ? [] : [`step_${index}`],
  }));

function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
}

interface SseEvent {
  id: string;
  type: string;
  data: { event: string; stream: string; seq: number; step?: { id: string; state: string } };
}

/** Reads SSE events until `until` says so; then closes the connection. */
function collect(url: string, until: (events: SseEvent[]) => boolean, lastEventId?: string): Promise<SseEvent[]> {
  // A reconnecting client sends the last id it saw as Last-Event-ID, as browsers do.
  const source = new EventSource(url, {
    fetch: (input, init) =>
      fetch(input, { ...init, headers: { ...init.headers, ...(lastEventId && { "last-event-id": lastEventId }) } }),
  });
  const events: SseEvent[] = [];
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      source.close();
      reject(new Error(`timed out after ${events.length} events`));
    }, 20_000);
    const onEvent = (message: MessageEvent) => {
      events.push({ id: message.lastEventId, type: message.type, data: JSON.parse(message.data) });
      if (until(events)) {
        clearTimeout(timer);
        source.close();
        resolve(events);
      }
    };
    // Every event type the server may send: a gap in the sequence numbers would show a loss.
    for (const type of [
      "plan.created",
      "plan.step",
      "plan.updated",
      "run.started",
      "run.completed",
      "run.failed",
      "run.paused",
      "run.resumed",
      "run.running",
      "run.plan_changed",
      "step.progress",
      "step.log",
      "step.retrying",
      "step.interrupted",
      "approval.requested",
      "approval.decided",
      "approval.expiring",
      "input.requested",
      "input.answered",
      "signal.raised",
      "signal.cleared",
    ]) {
      source.addEventListener(type, onEvent);
    }
    source.onerror = (error) => {
      if (source.readyState === EventSource.CLOSED) reject(error);
    };
  });
}

describe("seed 001 HTTP API", () => {
  it("creates a ready plan with seed 001's step metadata, queued events and artifacts on disk", async () => {
    const url = await start();
    const response = await post(`${url}/api/plan`, { goal: "Ship the milestone", steps: sleeps(2, 10) });
    expect(response.status).toBe(201);
    const { plan, traceId } = await response.json();
    expect(traceId).toMatch(/^[0-9a-f-]{36}$/);
    expect(plan).toMatchObject({ id: expect.stringMatching(/^plan-[0-9a-f]{8}$/), goal: "Ship the milestone" });
    expect(plan.steps[0]).toEqual(
      expect.objectContaining({
        id: "step_1",
        action: "Sleep 1",
        tool: "sleep",
        capability: "time.wait",
        capabilityLabel: expect.any(String),
        labels: [],
        timeoutSeconds: expect.any(Number),
        approvalRequired: false,
      }),
    );
    const dir = path.join(harness!.workspace, ".plans", plan.id);
    const stored = JSON.parse(await fs.readFile(path.join(dir, "plan.json"), "utf8"));
    expect(stored).toMatchObject({ id: plan.id, version: 1, goal: "Ship the milestone" });
    expect(await fs.readFile(path.join(dir, "plan.md"), "utf8")).toContain("# Ship the milestone");
    expect((await fs.readdir(dir)).sort()).toEqual(["plan.json", "plan.md"]);

    // Accumulated events as JSON: the creation and one queued plan.step per step.
    const events = await (
      await fetch(`${url}/api/plan/${plan.id}/events`, { headers: { accept: "application/json" } })
    ).json();
    expect(events.events.map((event: { event: string }) => event.event)).toEqual([
      "plan.created",
      "plan.step",
      "plan.step",
    ]);
    expect(events.events[1]).toMatchObject({
      traceId,
      planId: plan.id,
      step: { id: "step_1", state: "queued", action: "Sleep 1" },
    });

    // Read back as JSON and as Markdown; a new version rewrites the artifacts.
    const read = await (await fetch(`${url}/api/plan/${plan.id}`)).json();
    expect(read.plan.steps).toHaveLength(2);
    const markdown = await fetch(`${url}/api/plan/${plan.id}`, { headers: { accept: "text/markdown" } });
    expect(markdown.headers.get("content-type")).toContain("text/markdown");
    await harness!.caller.plans.edit({
      planId: plan.id,
      baseVersion: 1,
      edit: { kind: "updatePlan", changes: { goal: "Ship it" } },
    });
    expect(JSON.parse(await fs.readFile(path.join(dir, "plan.json"), "utf8"))).toMatchObject({
      version: 2,
      goal: "Ship it",
    });
  });

  it("streams a run live over SSE; reconnecting with the last id misses and repeats nothing", async () => {
    const url = await start();
    const created = await (await post(`${url}/api/plan`, { goal: "Sleep in a row", steps: sleeps(4, 250) })).json();
    const plan = { ...created.plan, traceId: created.traceId };
    const eventsUrl = `${url}/api/plan/${plan.id}/events`;
    const first = collect(eventsUrl, (events) => events.some((event) => event.data.step?.state === "running"));
    const approved = await post(`${url}/api/plan/${plan.id}/approve`, {});
    expect(approved.status).toBe(201);
    const part1 = await first;
    // Resume from the last id the first connection saw, mid-run.
    const part2 = await collect(
      eventsUrl,
      (events) => events.some((event) => event.type === "run.completed"),
      part1.at(-1)!.id,
    );
    const all = [...part1, ...part2];
    const byStream = new Map<string, number[]>();
    for (const event of all)
      byStream.set(event.data.stream, [...(byStream.get(event.data.stream) ?? []), event.data.seq]);
    for (const [stream, seqs] of byStream) {
      expect(seqs, stream).toEqual(Array.from({ length: seqs.length }, (_, index) => index + 1));
    }
    // The run, its steps' idempotency keys, and the plan's versions and runs, as plain JSON.
    const runs = await (await fetch(`${url}/api/plan/${plan.id}/runs`)).json();
    expect(runs.runs).toHaveLength(1);
    const run = await (await fetch(`${url}/api/runs/${runs.runs[0].id}`)).json();
    expect(run).toMatchObject({ status: "completed", traceId: plan.traceId });
    expect(run.steps[0].idempotencyKey).toBe(`${run.id}:step_1`);
    const versions = await (await fetch(`${url}/api/plan/${plan.id}/versions`)).json();
    expect(versions.versions.map((version: { version: number }) => version.version)).toEqual([1]);
    const states = all.filter((event) => event.type === "plan.step" && event.data.stream !== plan.id);
    // The run shares the plan's trace, and every step transition names its idempotency key.
    const runId = states[0]!.data.stream;
    expect(states.every((event) => (event.data as { traceId?: string }).traceId === plan.traceId)).toBe(true);
    expect((states[0]!.data.step as { idempotencyKey?: string }).idempotencyKey).toBe(
      `${runId}:${states[0]!.data.step!.id}`,
    );
    expect(
      states.filter((event) => event.data.step!.state === "completed").map((event) => event.data.step!.id),
    ).toEqual(["step_1", "step_2", "step_3", "step_4"]);
  });

  it("plans a bare goal with the configured LLM, and the answer matches the OpenAPI document", async () => {
    const url = await start();
    await fs.writeFile(path.join(harness!.workspace, "README.md"), "# Demo\n");
    const llm = await startScriptedLlm();
    try {
      installPlanner(
        harness!.app,
        createPlannerDeps(
          harness!.app,
          readPlannerConfig({
            STEPWISE_LLM_BASE_URL: llm.baseUrl,
            STEPWISE_LLM_MODELS: "scripted-planner",
            STEPWISE_PLANNER_RETRIES: "0",
          }),
        ),
      );
      llm.script({ json: goodPlan });
      const response = await post(`${url}/api/plan`, { goal: "Show the README" });
      expect(response.status).toBe(201);
      const body = await response.json();
      expect(body.plan.steps.map((step: { tool: string }) => step.tool)).toEqual(["read_file", "echo"]);
      expect(JSON.stringify(llm.requests[0]!.messages)).toContain("Show the README");
      await fs.access(path.join(harness!.workspace, ".plans", body.plan.id, "plan.json"));
      // The documented response schema accepts the answer.
      const paths = openApiDocument().paths as Record<
        string,
        { post?: { responses: Record<string, { content: Record<string, { schema: object }> }> } }
      >;
      const documented = z.fromJSONSchema(
        paths["/api/plan"]!.post!.responses["201"]!.content["application/json"]!.schema as never,
      );
      expect(documented.safeParse(body).success).toBe(true);
      expect(documented.safeParse({ plan: { id: 1 } }).success).toBe(false);
    } finally {
      await llm.close();
    }
  });

  it("refuses bad input with problem+json and stores nothing; approvals and decisions are a person's", async () => {
    const url = await start();
    const cases: [Promise<Response>, number, string][] = [
      [post(`${url}/api/plan`, "{not json"), 400, "invalid_input"],
      [post(`${url}/api/plan`, { goal: "" }), 400, "invalid_input"],
      [post(`${url}/api/plan`, { goal: "g", steps: [{ id: "step_1", tool: "teleport" }] }), 422, "invalid_plan"],
      [post(`${url}/api/plan`, { goal: "No provider" }), 503, "unavailable"],
      [post(`${url}/api/plan`, { goal: "g", steps: [], workspace: "/nope/not/here" }), 400, "invalid_input"],
      [fetch(`${url}/api/plan/plan-00000000`), 404, "not_found"],
      [fetch(`${url}/api/plan/plan-00000000/events`, { headers: { accept: "application/json" } }), 404, "not_found"],
      [post(`${url}/api/plan`, { goal: "g", steps: "x".repeat(2_000_000) }), 413, ""],
    ];
    for (const [pending, status, code] of cases) {
      const response = await pending;
      expect(response.status).toBe(status);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      if (code) expect((await response.json()).code).toBe(code);
    }
    expect((await harness!.app.db.pool.query("select count(*)::int as n from plans")).rows[0].n).toBe(0);

    const { plan } = await (
      await post(
        `${url}/api/plan`,
        { goal: "Gated", steps: [{ id: "step_1", tool: "write_file", args: { path: "a", content: "b" } }] },
        {
          authorization: `Bearer ${AGENT_TOKEN}`,
        },
      )
    ).json();
    const wrongAccept = await fetch(`${url}/api/plan/${plan.id}/events`, { headers: { accept: "text/html" } });
    expect(wrongAccept.status).toBe(400);
    const byAgent = await post(`${url}/api/plan/${plan.id}/approve`, {}, { authorization: `Bearer ${AGENT_TOKEN}` });
    expect(byAgent.status).toBe(403);
    const { runId } = await (await post(`${url}/api/plan/${plan.id}/approve`, {})).json();
    await harness!.waitForRun(runId, ["running"]);
    const decideByAgent = await post(
      `${url}/api/runs/${runId}/decide`,
      { stepId: "step_1", approve: true },
      {
        authorization: `Bearer ${AGENT_TOKEN}`,
      },
    );
    expect(decideByAgent.status).toBe(403);
    const decided = await post(`${url}/api/runs/${runId}/decide`, { stepId: "step_1", approve: true });
    expect(await decided.json()).toEqual({ ok: true });
    expect((await harness!.waitForRun(runId)).status).toBe("completed");
  });

  it("screens every path parameter and query number: 400 problem+json naming it, never a 500", async () => {
    const url = await start();
    const { plan } = await (await post(`${url}/api/plan`, { goal: "Screened", steps: sleeps(1, 1) })).json();
    const cursor = (seq: number) => Buffer.from(JSON.stringify({ [plan.id]: seq })).toString("base64url");
    const cases: [Promise<Response>, string][] = [
      [fetch(`${url}/api/runs/not-a-uuid`), "runId"],
      [fetch(`${url}/api/runs/${"1".repeat(40)}`), "runId"],
      [post(`${url}/api/runs/not-a-uuid/decide`, { stepId: "step_1", approve: true }), "runId"],
      [fetch(`${url}/api/plan/${plan.id}?version=99999999999999999999`), "version"],
      [fetch(`${url}/api/plan/${plan.id}?version=2147483648`), "version"],
      [fetch(`${url}/api/plan/${plan.id}?version=1e3`), "version"],
      [fetch(`${url}/api/plan/${plan.id}?version=0`), "version"],
      [fetch(`${url}/api/plan/${plan.id}?version=-1`), "version"],
      [fetch(`${url}/api/plan/${plan.id}?version=`), "version"],
      [fetch(`${url}/api/plan/${"p".repeat(101)}`), "planId"],
      [fetch(`${url}/api/plan/${"p".repeat(101)}/runs`), "planId"],
      [
        fetch(`${url}/api/plan/${plan.id}/events?after=${cursor(1e30)}`, { headers: { accept: "application/json" } }),
        "",
      ],
      [fetch(`${url}/api/plan/${plan.id}/events?after=${cursor(-1)}`, { headers: { accept: "application/json" } }), ""],
      // NUL or other control characters in any path parameter: refused by the door, before any route.
      [fetch(`${url}/api/runs/abc%00def`), ""],
      [fetch(`${url}/api/plan/plan%00x/versions`), ""],
      [post(`${url}/api/runs/${"0".repeat(8)}-0000-0000-0000-${"0".repeat(12)}%00/decide`, {}), ""],
      [fetch(`${url}/api/plan/a%1fb`), ""],
    ];
    for (const [pending, parameter] of cases) {
      const response = await pending;
      const text = await response.text();
      expect(response.status, `${response.url}: ${text}`).toBe(400);
      expect(response.headers.get("content-type")).toBe("application/problem+json");
      if (parameter) expect(JSON.parse(text).details.issues[0].path).toEqual([parameter]);
      expect(text).not.toMatch(/prisma|postgres|invalid input syntax|out of range/i);
    }
    // The well-formed ones still answer.
    expect((await fetch(`${url}/api/plan/${plan.id}?version=1`)).status).toBe(200);
    expect((await fetch(`${url}/api/plan/${plan.id}?version=2147483647`)).status).toBe(404);
    expect((await fetch(`${url}/api/runs/${"0".repeat(8)}-0000-0000-0000-${"0".repeat(12)}`)).status).toBe(404);
  });
});

describe("a long-lived event stream", () => {
  it("keeps one abort listener on its request however long it waits", async () => {
    const base = await start();
    const created = await post(`${base}/api/plan`, { goal: "Wait", steps: sleeps(1, 10) });
    const { plan } = (await created.json()) as { plan: { id: string } };
    const request = new AbortController();
    const stream = sseStream(harness!.app, plan.id, {}, new Map(), request.signal);
    const reader = stream.getReader();
    // The stream waits a second at a time for new events: let it go round several times.
    const deadline = Date.now() + 3_500;
    while (Date.now() < deadline) {
      await Promise.race([reader.read(), new Promise((resolve) => setTimeout(resolve, 250))]);
    }
    expect(getEventListeners(request.signal, "abort")).toHaveLength(1);
    request.abort();
    await reader.cancel();
  });
});
