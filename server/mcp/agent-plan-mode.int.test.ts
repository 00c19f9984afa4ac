import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { createAppContext } from "../app-context";
import type { AppContext } from "../services";

/**
 * Seed 002's plan mode is the agent's (its name under its credential), not one MCP connection's:
 * every connection of the agent and its CLI are held read-only while it plans, also after a
 * restart (a fresh app context and API on the same database); `exit_plan_mode` lets every one go.
 * And seed 000's todo plans survive a restart: the connection carries on (its MCP session is
 * stored), and when the session itself was lost the same agent's new connection resumes its plan,
 * or, when it does not come back, the run ends with the reason.
 */
const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = path.join(projectRoot, "bin/stepwise.mjs");
const AGENT_TOKEN = "plan-mode-agent-token";
let harness: Harness | undefined;
let restarted: AppContext | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
const clients: Client[] = [];
const savedEnv: Record<string, string | undefined> = {};

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  await api?.close();
  await restarted?.close();
  await harness?.close();
  for (const [name, value] of Object.entries(savedEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
    delete savedEnv[name];
  }
  api = undefined;
  restarted = undefined;
  harness = undefined;
});

// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Answer = Record<string, any>;

/** `sessionId`: carry on an MCP session opened before (the client sends no initialize then). */
async function connect(agentName: string, sessionId?: string) {
  harness ??= await startHarness();
  api ??= await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  const client = new Client({ name: "plan-mode-test", version: "1.0.0" });
  let listChanges = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    listChanges++;
  });
  const transport = new StreamableHTTPClientTransport(new URL("/api/mcp", api.url), {
    requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": agentName } },
    ...(sessionId && { sessionId }),
  });
  await client.connect(transport);
  clients.push(client);
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await client.callTool({ name, arguments: args });
    const text = (result.content as { text: string }[])[0]!.text;
    return { isError: result.isError === true, body: JSON.parse(text) as Answer };
  };
  const ok = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await call(name, args);
    expect(result.isError, JSON.stringify(result.body)).toBe(false);
    return result.body;
  };
  const toolNames = async () => (await client.listTools()).tools.map((tool) => tool.name);
  return { call, ok, toolNames, listChanges: () => listChanges, sessionId: () => transport.sessionId };
}

/** One `stepwise` CLI call as the named agent, against the running API. */
function cli(agent: string, args: string[]): Promise<{ status: number | null; stdout: string }> {
  const { DATABASE_URL: _unset, ...inherited } = process.env;
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: { ...inherited, STEPWISE_URL: api!.url, STEPWISE_TOKEN: AGENT_TOKEN, STEPWISE_AGENT: agent },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout!.on("data", (chunk) => (stdout += chunk));
    child.stderr!.on("data", (chunk) => (stdout += chunk));
    child.on("error", reject);
    child.on("exit", (status) => resolve({ status, stdout }));
  });
}

/**
 * The server process ends and a new one starts on the same database: the API goes away with what
 * it held in memory of the MCP sessions (nobody closed them), and a fresh app context serves.
 * The sessions themselves are stored, so their clients carry on — unless `sessionsLost`: their
 * records are gone too, as when the server before kept its sessions in memory only.
 */
async function restart(options: { sessionsLost?: boolean } = {}) {
  await api!.close();
  const held = (globalThis as Record<symbol, Map<string, unknown> | undefined>)[Symbol.for("stepwise.mcpSessions")];
  held?.clear();
  if (options.sessionsLost) await harness!.app.db.pool.query("delete from mcp_sessions");
  restarted = await createAppContext({
    databaseUrl: harness!.databaseUrl,
    workspaceRoot: harness!.workspace,
    worker: { concurrency: 4 },
  });
  api = await startApiServer(restarted, { agentToken: AGENT_TOKEN });
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 90_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const PLAN = {
  summary: "Rename the setting",
  steps: [{ description: "Rename the setting in config.ts", tools: ["str_replace"], risk: "low" }],
};

describe("plan mode belongs to the agent", () => {
  it("holds every connection and the CLI of the agent, not another agent; exit_plan_mode lets all go", async () => {
    const first = await connect("alpha");
    const second = await connect("alpha");
    const other = await connect("beta");
    expect(await second.toolNames()).toContain("start");

    await first.ok("enter_plan_mode", { reason: "A risky rename" });
    // The agent's other connection follows at once, told by tools/list_changed.
    await waitFor(
      async () => second.listChanges(),
      (count) => count >= 1,
      "tools/list_changed on the second connection",
    );
    const held = await second.toolNames();
    for (const name of ["start", "update", "plan_edit", "planning_setup_plan"]) expect(held, name).not.toContain(name);
    expect(held).toContain("submit_plan");
    const refused = await second.call("start", { goal: "Sneak past plan mode" });
    expect(refused).toMatchObject({ isError: true, body: { code: "invalid_state" } });
    expect(refused.body.detail).toContain("not available in plan mode");
    // Another agent is not held.
    expect(await other.toolNames()).toContain("start");

    // The CLI of the same agent is held too, and changes nothing.
    const viaCli = await cli("alpha", ["start", "--goal", "Sneak past plan mode", "--json"]);
    expect(viaCli.status, viaCli.stdout).toBe(1);
    expect(viaCli.stdout).toContain("not available in plan mode");
    const status = await cli("alpha", ["status", "--json"]);
    expect(status.status, status.stdout).toBe(1);
    expect(status.stdout).toContain("not available in plan mode");
    expect((await harness!.app.db.pool.query("select 1 from agent_sessions")).rowCount).toBe(0);

    // The plan mode is the agent's: the second connection submits in the session the first entered.
    const submitted = await second.ok("submit_plan", PLAN);
    expect(await first.toolNames()).not.toContain("start");

    // exit_plan_mode really leaves, for every connection and the CLI; the plan still waits for review.
    const changesBefore = second.listChanges();
    expect((await first.ok("exit_plan_mode")).message).toContain("Left plan mode");
    expect(await first.toolNames()).toContain("start");
    await waitFor(
      async () => second.listChanges(),
      (count) => count > changesBefore,
      "tools/list_changed on leaving",
    );
    expect(await second.toolNames()).toContain("start");
    expect(await second.ok("plan_review_status", { plan_id: submitted.plan_id })).toMatchObject({
      state: "awaiting_review",
    });
    const started = await cli("alpha", ["start", "--goal", "Now allowed", "--workspace", harness!.workspace, "--json"]);
    expect(started.status, started.stdout).toBe(0);
  });

  it("still holds the agent after a restart, on a new connection and through the CLI", async () => {
    const before = await connect("alpha");
    const entered = await before.ok("enter_plan_mode", { reason: "Plan across a restart" });
    await restart();

    const after = await connect("alpha");
    const held = await after.toolNames();
    expect(held).not.toContain("start");
    expect(held).toContain("submit_plan");
    expect((await after.call("start", { goal: "Sneak past plan mode" })).isError).toBe(true);
    const viaCli = await cli("alpha", ["start", "--goal", "Sneak past plan mode", "--json"]);
    expect(viaCli.status, viaCli.stdout).toBe(1);
    expect(viaCli.stdout).toContain("not available in plan mode");

    // The new connection works in the session the agent entered before the restart.
    expect(held).not.toContain("enter_plan_mode");
    const submitted = await after.ok("submit_plan", PLAN);
    const session = await harness!.app.db.pool.query("select plan_id from planning_sessions where id = $1", [
      entered.planning_session_id,
    ]);
    expect(session.rows[0].plan_id).toBe(submitted.plan_id);
    // Still held while the plan waits for review, until the agent exits.
    expect(await after.toolNames()).not.toContain("start");
    await after.ok("exit_plan_mode");
    expect(await after.toolNames()).toContain("start");
  });
});

describe("todo plans across a restart", () => {
  it("the same agent's new connection resumes its todo plan, with the reason audited", async () => {
    const before = await connect("todo-agent");
    const plan = await before.ok("planning_setup_plan", { objective: "Survive a restart", initial_steps: ["A", "B"] });
    await before.ok("planning_update_step", { step_id: 1, status: "done" });
    await restart({ sessionsLost: true });

    // Another agent's new connection does not get it.
    const stranger = await connect("someone-else");
    expect((await stranger.call("planning_read_plan")).isError).toBe(true);

    const after = await connect("todo-agent");
    const resumed = await after.ok("planning_read_plan");
    expect(resumed).toMatchObject({
      objective: "Survive a restart",
      plan_id: plan.plan_id,
      run_id: plan.run_id,
      steps: [
        { step_id: 1, status: "done" },
        { step_id: 2, status: "pending" },
      ],
    });
    const done = await after.ok("planning_update_step", { step_id: 2, status: "done" });
    expect(done.status).toBe("completed");
    const audit = await harness!.app.db.pool.query(
      "select actor, detail from audit_entries where action = 'todo.resumed'",
    );
    expect(audit.rows).toMatchObject([{ actor: "todo-agent", detail: { reason: expect.stringContaining("restart") } }]);
  });

  it("the connection itself carries on after a restart with its todo plan, which no new connection takes", async () => {
    const first = await connect("steady-agent");
    const plan = await first.ok("planning_setup_plan", { objective: "Carry on", initial_steps: ["A", "B"] });
    await restart();

    // The same MCP session, served by the new process (at its new address: as behind a proxy).
    const before = await connect("steady-agent", first.sessionId());
    expect(before.sessionId()).toBe(first.sessionId());
    await before.ok("planning_update_step", { step_id: 1, status: "done" });
    expect(await before.ok("planning_read_plan")).toMatchObject({
      plan_id: plan.plan_id,
      steps: [
        { step_id: 1, status: "done" },
        { step_id: 2, status: "pending" },
      ],
    });
    // Its session is open: a new connection of the same agent starts without it.
    const other = await connect("steady-agent");
    expect((await other.call("planning_read_plan")).isError).toBe(true);
    expect((await before.ok("planning_read_plan")).plan_id).toBe(plan.plan_id);
    const audit = await harness!.app.db.pool.query("select 1 from audit_entries where action = 'todo.resumed'");
    expect(audit.rowCount).toBe(0);
  });

  it("a todo run whose agent does not come back after a restart ends with the reason", async () => {
    savedEnv.STEPWISE_MCP_TODO_IDLE_TIMEOUT_MS = process.env.STEPWISE_MCP_TODO_IDLE_TIMEOUT_MS;
    process.env.STEPWISE_MCP_TODO_IDLE_TIMEOUT_MS = "3000";
    const before = await connect("gone-agent");
    const plan = await before.ok("planning_setup_plan", { objective: "Left behind", initial_steps: ["A"] });
    await before.ok("planning_update_step", { step_id: 1, status: "in_progress" });
    await restart();

    const run = await harness!.waitForRun(plan.run_id, ["cancelled", "completed", "failed"], 90_000);
    expect(run.status).toBe("cancelled");
    // The abandonment is audited beside the cancel, not in its transaction: wait for it too.
    const abandoned = async () =>
      (await harness!.app.db.pool.query("select actor, detail from audit_entries where action = 'todo.abandoned'"))
        .rows;
    await expect.poll(abandoned, { timeout: 60_000 }).toHaveLength(1);
    expect(await abandoned()).toMatchObject([
      { actor: "stepwise", detail: { runCancelled: true, reason: expect.stringContaining("server restarted") } },
    ]);
    const stored = await harness!.app.db.pool.query("select reason from runs where id = $1", [plan.run_id]);
    expect(stored.rows[0].reason).toContain("server restarted");
  });
});
