import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
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
import { withCaller } from "../caller-context";
import { invokeOperation } from "../operations/operation";
import { decisionLinkCreate } from "../operations/decision-links";
import { planApprove, planCreate } from "../operations/plans";
import { addPrincipal } from "../people/principals";
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

const previousDataDir = process.env.STEPWISE_DATA_DIR;
let dataDir: string | undefined;

afterEach(async () => {
  if (previousDataDir === undefined) delete process.env.STEPWISE_DATA_DIR;
  else process.env.STEPWISE_DATA_DIR = previousDataDir;
  if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
  dataDir = undefined;
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  await proxy?.close();
  for (const web of webs) await web.stop();
  await harness?.close();
  proxy = undefined;
  webs = [];
  harness = undefined;
});

async function start(extra: { accessToken?: string; dataDir?: string } = {}): Promise<HttpProxy> {
  harness = await startHarness();
  const options = { databaseUrl: harness.databaseUrl, workspace: harness.workspace, agentToken: AGENT_TOKEN, ...extra };
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
  it("a sign-in on one process holds on the other, and a decision link opened on one is used once across both", async () => {
    const accessToken = "web-processes-access-token";
    // One data folder for this test and both processes: the decision-link key they sign with.
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-web-processes-"));
    process.env.STEPWISE_DATA_DIR = dataDir;
    const { url, route } = await start({ accessToken, dataDir });
    const h = harness!;
    const alice = await withCaller({ kind: "person", name: "user" }, () =>
      addPrincipal(h.app.db.pool, { kind: "person", name: "alice", role: "approver", createdBy: "user" }),
    );
    const person = { kind: "person" as const, name: "alice", role: "approver" as const, tokenId: alice.credentialId };

    // Signed in through the first process; the cookie is honoured by the second.
    route([0]);
    const signedIn = await fetch(`${url}/sign-in`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", origin: url, "sec-fetch-site": "same-origin" },
      body: new URLSearchParams({ token: alice.token }).toString(),
      redirect: "manual",
    });
    expect(signedIn.status).toBe(303);
    const cookie = signedIn.headers.get("set-cookie")!.split(";")[0]!;
    route([1]);
    const me = await fetch(`${url}/api/ops/people.me`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie },
      body: "{}",
    });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ name: "alice", role: "approver" });

    // A run waiting for alice's approval, and a link she made for it.
    const step = {
      id: "write",
      description: "write a file",
      tool: "shell",
      args: { command: "echo linked > linked.txt" },
    };
    const plan = await invokeOperation(
      planCreate,
      { app: h.app, identity: person },
      { draft: { goal: "links", steps: [step] } },
    );
    const { runId } = await invokeOperation(
      planApprove,
      { app: h.app, identity: person },
      { planId: plan.id, version: plan.version },
    );
    const waiting = async () =>
      (await h.app.db.pool.query("select status from run_steps where run_id = $1 and step_id = 'write'", [runId]))
        .rows[0]?.status;
    await expect.poll(waiting, { timeout: 60_000 }).toBe("awaiting_approval");
    const link = await invokeOperation(
      decisionLinkCreate,
      { app: h.app, identity: person },
      { runId, stepId: "write" },
    );

    const press = (decision: string) =>
      fetch(`${url}${link.url}`, {
        method: "POST",
        headers: { "content-type": "application/json", origin: url, "sec-fetch-site": "same-origin" },
        body: JSON.stringify({ decision }),
        redirect: "manual",
      });
    route([0]);
    const page = await fetch(`${url}${link.url}`, { headers: { accept: "text/html" }, redirect: "manual" });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('data-decision="approve"');
    // Decided through the second process, once: the first then refuses it as used.
    route([1]);
    const decided = await press("approve");
    expect(decided.status).toBe(200);
    expect(await decided.json()).toMatchObject({ runId, stepId: "write", decision: "approve", decidedAs: "alice" });
    route([0]);
    const again = await press("deny");
    expect(again.status).toBe(412);
    expect((await again.json()).detail).toContain("already used");
    const approvals = await h.app.db.pool.query("select actor, decision from approvals where run_id = $1", [runId]);
    expect(approvals.rows).toEqual([{ actor: "alice", decision: "approved" }]);
  });
});
