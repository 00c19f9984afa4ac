import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { createTRPCClient, createWSClient, wsLink } from "@trpc/client";
import superjson from "superjson";
import WebSocket from "ws";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { EventSource } from "eventsource";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startHttpProxy, type HttpProxy } from "../../tests/http-proxy";
import { spawnWebProcess, type WebProcess } from "../../tests/web-process";
import { readEvents } from "../events/store";
import type { AppRouter } from "../trpc/root";

/**
 * Several web processes on one database behind a proxy (docs/scaling.md "Several web processes"):
 * two separate web processes — nothing in memory shared — and the steps run by a worker beside
 * them (this test's own app context). The proxy sends each request to the next process in turn,
 * so a client's consecutive requests land on different processes; then one process is stopped
 * and the client goes on through the other.
 */
const AGENT_TOKEN = "web-processes-agent-token";
let harness: Harness | undefined;
let webs: WebProcess[] = [];
let proxy: HttpProxy | undefined;
const clients: Client[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  await proxy?.close();
  for (const web of webs) await web.stop();
  await harness?.close();
  proxy = undefined;
  webs = [];
  harness = undefined;
});

async function start(): Promise<HttpProxy> {
  harness = await startHarness();
  const options = { databaseUrl: harness.databaseUrl, workspace: harness.workspace, agentToken: AGENT_TOKEN };
  webs = await Promise.all([spawnWebProcess(options), spawnWebProcess(options)]);
  proxy = await startHttpProxy(webs.map((web) => web.url));
  return proxy;
}

type CallResult = Awaited<ReturnType<Client["callTool"]>>;
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Answer = Record<string, any>;

const EVENT_TYPES = [
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
];

function answer(result: CallResult): Answer {
  const text = (result.content as { text: string }[])[0]!.text;
  expect(result.isError, text).toBeFalsy();
  return JSON.parse(text) as Answer;
}

describe("several web processes behind a proxy", () => {
  it("an MCP session opened on one process carries on through both, and through the other when the first stops", async () => {
    const { url, served, route } = await start();
    const client = new Client({ name: "roaming-client", version: "1.0.0" });
    const transport = new StreamableHTTPClientTransport(new URL("/api/mcp", url), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": "roaming-agent" } },
    });
    await client.connect(transport);
    clients.push(client);
    const sessionId = transport.sessionId!;
    expect(sessionId).toBeTruthy();

    const plan = answer(
      await client.callTool({ name: "planning_setup_plan", arguments: { objective: "Roam", initial_steps: ["one"] } }),
    );
    for (const title of ["two", "three", "four"]) {
      answer(await client.callTool({ name: "planning_add_step", arguments: { steps: [title] } }));
    }
    // A registry operation too, on the same session.
    expect(answer(await client.callTool({ name: "run_get", arguments: { run_id: plan.run_id } }))).toMatchObject({
      id: plan.run_id,
    });
    const sessionRequests = () => served.filter((entry) => entry.mcpSession === sessionId);
    // Both processes answered the session's requests, and it was initialised once.
    expect(new Set(sessionRequests().map((entry) => entry.backend))).toEqual(new Set([0, 1]));
    expect(served.filter((entry) => entry.path === "/api/mcp" && !entry.mcpSession)).toHaveLength(1);

    // Someone else naming the session is refused on either process.
    for (const backend of [0, 1]) {
      const foreign = await fetch(`${webs[backend]!.url}/api/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${AGENT_TOKEN}`,
          "x-stepwise-agent": "someone-else",
          "mcp-session-id": sessionId,
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 99, method: "ping" }),
      });
      await foreign.text();
      expect(foreign.status, `backend ${backend}`).toBe(403);
    }

    // The first process stops; the proxy sends everything to the second.
    route([1]);
    await webs[0]!.stop();
    const before = sessionRequests().length;
    answer(await client.callTool({ name: "planning_update_step", arguments: { step_id: 1, status: "done" } }));
    answer(await client.callTool({ name: "planning_add_step", arguments: { steps: ["five"] } }));
    const read = answer(await client.callTool({ name: "planning_read_plan", arguments: {} }));
    expect(read).toMatchObject({ plan_id: plan.plan_id, run_id: plan.run_id, objective: "Roam" });
    expect(read.steps.map((step: { title: string; status: string }) => [step.title, step.status])).toEqual([
      ["one", "done"],
      ["two", "pending"],
      ["three", "pending"],
      ["four", "pending"],
      ["five", "pending"],
    ]);
    expect(transport.sessionId).toBe(sessionId);
    expect(
      sessionRequests()
        .slice(before)
        .every((entry) => entry.backend === 1),
    ).toBe(true);
    expect(served.filter((entry) => entry.path === "/api/mcp" && !entry.mcpSession)).toHaveLength(1);

    // Closing it on the second process closes it for every process.
    await transport.terminateSession();
    const stored = await harness!.app.db.pool.query("select closed_at, closed_reason from mcp_sessions where id = $1", [
      sessionId,
    ]);
    expect(stored.rows[0]).toMatchObject({ closed_at: expect.any(Date), closed_reason: "closed by the client" });
    const after = await fetch(`${webs[1]!.url}/api/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: `Bearer ${AGENT_TOKEN}`,
        "x-stepwise-agent": "roaming-agent",
        "mcp-session-id": sessionId,
        "mcp-protocol-version": "2025-06-18",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 100, method: "ping" }),
    });
    await after.text();
    expect(after.status).toBe(404);
  });

  it("a plan's live events, followed through the proxy, carry on from the last id when the serving process stops", async () => {
    const { url, served, route } = await start();
    const steps = Array.from({ length: 6 }, (_, index) => ({
      id: `step_${index + 1}`,
      title: `Sleep ${index + 1}`,
      tool: "sleep",
      args: { ms: 300 },
      dependsOn: index === 0 ? [] : [`step_${index}`],
    }));
    // Everything through the first process, until it stops.
    route([0]);
    const created = await fetch(`${url}/api/plan`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ goal: "Sleep across a stop", steps }),
    });
    expect(created.status).toBe(201);
    const planId = ((await created.json()) as { plan: { id: string } }).plan.id;
    const eventsPath = `/api/plan/${planId}/events`;

    interface Seen {
      id: string;
      type: string;
      data: { stream: string; seq: number; step?: { id: string; state: string } };
    }
    const seen: Seen[] = [];
    // One EventSource, as a browser keeps: when its connection ends it reconnects by itself,
    // sending the last id it saw (Last-Event-ID), and the proxy sends it to the process still up.
    const source = new EventSource(`${url}${eventsPath}`);
    let stopping: Promise<void> | undefined;
    const finished = new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`timed out after ${seen.length} events`)), 120_000);
      const onEvent = (message: MessageEvent) => {
        const event = { id: message.lastEventId, type: message.type, data: JSON.parse(message.data) } as Seen;
        seen.push(event);
        // Mid-run, the process serving the stream stops.
        if (!stopping && event.data.step?.id === "step_2" && event.data.step.state === "running") {
          route([1]);
          stopping = webs[0]!.stop();
        }
        if (event.type === "run.completed" || event.type === "run.failed") {
          clearTimeout(timer);
          resolve();
        }
      };
      // Every event type the server may send: a gap in the sequence numbers would show a loss.
      for (const type of EVENT_TYPES) source.addEventListener(type, onEvent);
    });
    try {
      const approved = await fetch(`${url}/api/plan/${planId}/approve`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: "{}",
      });
      expect(approved.status).toBe(201);
      await finished;
    } finally {
      source.close();
    }
    await stopping;

    expect(seen.at(-1)!.type).toBe("run.completed");
    // The stream was served by both processes: the first until it stopped, then the second.
    const streamRequests = served.filter((entry) => entry.path === eventsPath);
    expect(streamRequests.map((entry) => entry.backend)).toContain(0);
    expect(streamRequests.at(-1)!.backend).toBe(1);
    // Nothing lost, nothing repeated: each stream's sequence numbers run 1, 2, 3… without a gap.
    expect(new Set(seen.map((event) => event.id)).size).toBe(seen.length);
    const byStream = new Map<string, number[]>();
    for (const event of seen)
      byStream.set(event.data.stream, [...(byStream.get(event.data.stream) ?? []), event.data.seq]);
    for (const [stream, seqs] of byStream) {
      expect(seqs, stream).toEqual(Array.from({ length: seqs.length }, (_, index) => index + 1));
    }
    const completed = seen
      .filter(
        (event) => event.type === "plan.step" && event.data.stream !== planId && event.data.step?.state === "completed",
      )
      .map((event) => event.data.step!.id);
    expect(completed).toEqual(steps.map((step) => step.id));
  });
  it("the live view's run subscription, on the live socket through the proxy, resumes on the other process when its own stops", async () => {
    const { url, served, route } = await start();
    const h = harness!;
    const plan = await h.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "live across a stop",
        steps: [
          { id: "step_1", description: "first", tool: "echo", args: { value: 1 } },
          {
            id: "step_2",
            description: "gate",
            tool: "echo",
            args: { value: 2 },
            dependsOn: ["step_1"],
            approvalRequired: true,
          },
          { id: "step_3", description: "after", tool: "echo", args: { value: 3 }, dependsOn: ["step_2"] },
        ],
      }),
    });
    const { runId } = await h.caller.plans.approve({ planId: plan.id, version: 1 });
    await expect
      .poll(async () => (await readEvents(h.app.db.pool, runId, 0)).some((e) => e.type === "approval.requested"), {
        timeout: 60_000,
      })
      .toBe(true);

    // The browser's socket: its own pages' Origin, the proxy's address.
    class PageSocket extends WebSocket {
      constructor(address: string | URL, protocols?: string | string[]) {
        super(address, protocols, { headers: { origin: url } });
      }
    }
    route([0]);
    const client = createWSClient({
      url: `${url.replace("http:", "ws:")}/api/live`,
      WebSocket: PageSocket as unknown as typeof globalThis.WebSocket,
      retryDelayMs: () => 200,
    });
    const trpc = createTRPCClient<AppRouter>({ links: [wsLink({ client, transformer: superjson })] });
    const seqs: number[] = [];
    const subscription = trpc.runs.events.subscribe(
      { runId, lastEventId: null },
      { onData: ({ data }) => void seqs.push(data.seq), onError: () => undefined },
    );
    try {
      const waiting = await h.caller.runs.get({ runId });
      await expect.poll(() => seqs.at(-1), { timeout: 60_000 }).toBe(waiting.lastSeq);
      // The process holding the socket stops; the client reconnects through the proxy to the other.
      route([1]);
      await webs[0]!.stop();
      // The run goes on while the socket is down and after: the approval, then the last steps.
      await h.caller.runs.decide({ runId, stepId: "step_2", approve: true });
      await h.waitForRun(runId, ["completed"]);
      const done = await h.caller.runs.get({ runId });
      await expect.poll(() => seqs.at(-1), { timeout: 60_000 }).toBe(done.lastSeq);
      // Every event once, in order: resumed after the last one given, nothing lost or repeated.
      expect(seqs).toEqual(Array.from({ length: done.lastSeq }, (_, i) => i + 1));
      const sockets = served.filter((entry) => entry.method === "UPGRADE").map((entry) => entry.backend);
      expect(sockets[0]).toBe(0);
      expect(sockets.at(-1)).toBe(1);
    } finally {
      subscription.unsubscribe();
      client.close();
    }
  });
});
