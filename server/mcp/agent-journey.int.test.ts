import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";

/**
 * Seed 002's planning mode as one journey through the real MCP client: the agent plans read-only,
 * submits, a person approves, and the same agent is handed the plan's tasks until planning mode
 * ends — plus the tool restrictions of plan mode and a person skipping an absent agent's task.
 */
const AGENT_TOKEN = "journey-agent-token";
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
const clients: Client[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  await api?.close();
  await harness?.close();
  api = undefined;
  harness = undefined;
});

async function connect(agentName = "planner-agent") {
  harness ??= await startHarness();
  api ??= await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  const client = new Client({ name: "journey-test", version: "1.0.0" });
  let listChanges = 0;
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    listChanges++;
  });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/api/mcp", api.url), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": agentName } },
    }),
  );
  clients.push(client);
  const call = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await client.callTool({ name, arguments: args });
    const text = (result.content as { text: string }[])[0]!.text;
    return {
      isError: result.isError === true,
      body: JSON.parse(text) as Record<string, unknown> & { detail?: string },
    };
  };
  const ok = async (name: string, args: Record<string, unknown> = {}) => {
    const result = await call(name, args);
    expect(result.isError, JSON.stringify(result.body)).toBe(false);
    return result.body as Record<string, any>;
  };
  const toolNames = async () => (await client.listTools()).tools.map((tool) => tool.name).sort();
  return { client, call, ok, toolNames, listChanges: () => listChanges };
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 20_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The agent's status until it is something other than the instructions sync. */
async function statusOf(ok: (name: string) => Promise<Record<string, any>>) {
  let status = await ok("status");
  if (status.now?.reason === "sync_instructions") status = await ok("status");
  return status;
}

describe("an agent's plan, from plan mode to done", () => {
  it("plan mode lists and accepts only read-only and plan-mode tools, and says so when refusing", async () => {
    const agent = await connect();
    const before = await agent.toolNames();
    for (const name of ["start", "update", "plan_edit", "run_cancel", "workspace_register", "template_delete"]) {
      expect(before).toContain(name);
    }
    await agent.ok("enter_plan_mode", { reason: "A risky migration" });
    await waitFor(
      async () => agent.listChanges(),
      (count) => count >= 1,
      "tools/list_changed on entering",
    );
    const inPlanMode = await agent.toolNames();
    for (const name of [
      "start",
      "update",
      "plan_edit",
      "run_cancel",
      "workspace_register",
      "template_delete",
      "enter_plan_mode",
    ]) {
      expect(inPlanMode, name).not.toContain(name);
    }
    for (const name of [
      "ask_user",
      "get_answer",
      "submit_plan",
      "exit_plan_mode",
      "plan_get",
      "run_get",
      "plan_review_status",
    ]) {
      expect(inPlanMode, name).toContain(name);
    }
    const refused = await agent.call("workspace_register", { path: harness!.workspace });
    expect(refused.isError).toBe(true);
    expect(refused.body.code).toBe("invalid_state");
    expect(refused.body.detail).toContain("not available in plan mode");
    expect(refused.body.detail).toContain("exit_plan_mode");
    // Refused before anything happened.
    const started = await agent.call("start", { goal: "Sneak past plan mode" });
    expect(started.isError).toBe(true);
    const sessions = await harness!.app.db.pool.query("select 1 from agent_sessions");
    expect(sessions.rowCount).toBe(0);

    // Leaving plan mode gives every tool back, with a notification.
    const changesBefore = agent.listChanges();
    expect((await agent.ok("exit_plan_mode", { reason: "Changed my mind" })).status).toBe("exited");
    await waitFor(
      async () => agent.listChanges(),
      (count) => count > changesBefore,
      "tools/list_changed on leaving",
    );
    expect(await agent.toolNames()).toEqual(before);
    const audit = await harness!.app.db.pool.query("select actor from audit_entries where action = 'planning.exited'");
    expect(audit.rows).toEqual([{ actor: "planner-agent" }]);
  });

  it("approve → the same agent is handed the tasks in order → DONE → planning mode ends", async () => {
    const agent = await connect();
    const entered = await agent.ok("enter_plan_mode", { reason: "Two steps that depend on each other" });
    const submitted = await agent.ok("submit_plan", {
      summary: "Prepare, then change",
      steps: [{ description: "Read the configuration" }, { description: "Change the configuration", risk: "medium" }],
    });
    // Still in plan mode while the plan waits for review.
    expect(await agent.toolNames()).not.toContain("update");
    const caller = harness!.caller;
    const sessionId = entered.planning_session_id as string;
    expect((await caller.planner.command({ command: "/plan status", sessionId })).message).toContain("submitted");

    const { runId } = await caller.plans.approve({ planId: submitted.plan_id, version: submitted.version });
    // Another agent's session, open and newer: the approved plan's agent must still get its own.
    const other = await connect("other-agent");
    await other.ok("start", { goal: "Unrelated work of another agent" });
    const executing = await caller.planner.command({ command: "/plan status", sessionId });
    expect(executing.phase).toBe("executing");
    expect(executing.message).toContain("executing");

    // The approval left plan mode: the agent's next call sees every tool again.
    expect(await agent.toolNames()).toContain("update");
    const first = await statusOf(agent.ok);
    expect(first.now.reason).toBe("ready_for_task");
    expect(first.now.current_task).toMatchObject({ id: 1, title: "Read the configuration" });
    const session = first.session.id as string;
    const attached = await harness!.app.db.pool.query(
      "select created_by, run_id, planning_session_id, last_seen_at from agent_sessions where id = $1",
      [session],
    );
    expect(attached.rows[0]).toMatchObject({
      created_by: "planner-agent",
      run_id: runId,
      planning_session_id: sessionId,
    });
    expect(attached.rows[0].last_seen_at).not.toBeNull();

    await agent.ok("update", { payload: { update_tasks: [{ id: 1, status: "IN_PROGRESS" }] } });
    await agent.ok("update", { payload: { update_tasks: [{ id: 1, status: "DONE", notes: "Read it" }] } });
    const second = await statusOf(agent.ok);
    expect(second.now.current_task).toMatchObject({ id: 2, title: "Change the configuration" });
    await agent.ok("update", { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });

    await harness!.waitForRun(runId, ["completed"]);
    expect((await statusOf(agent.ok)).now.reason).toBe("plan_completed");
    const done = await caller.planner.command({ command: "/plan status", sessionId });
    expect(done.phase).toBe("done");
    expect(done.message).toContain("done");
    await agent.ok("update", { payload: { final_summary: "Configuration changed." } });
  });

  it("a person skips the tasks of an agent that went away, and the run ends", async () => {
    const agent = await connect();
    await agent.ok("enter_plan_mode", { reason: "Plan, then vanish" });
    const submitted = await agent.ok("submit_plan", {
      summary: "Two tasks",
      steps: [{ description: "First task" }, { description: "Second task" }],
    });
    await agent.client.close();
    const { runId } = await harness!.caller.plans.approve({ planId: submitted.plan_id, version: submitted.version });
    const panel = await harness!.caller.agents.sessionOfRun({ runId });
    expect(panel).toMatchObject({ agent: "planner-agent", lastSeenAt: null, closed: false });
    expect(panel!.idleSeconds).toBeGreaterThanOrEqual(0);

    await waitFor(
      () => harness!.caller.runs.get({ runId }),
      (run) => run.steps.find((step) => step.stepId === "step_1")?.status === "awaiting_agent",
      "task 1 waiting for its agent",
    );
    await harness!.caller.runs.skipStep({ runId, stepId: "step_1" });
    await waitFor(
      () => harness!.caller.runs.get({ runId }),
      (run) => run.steps.find((step) => step.stepId === "step_2")?.status === "awaiting_agent",
      "task 2 waiting for its agent",
    );
    await harness!.caller.runs.skipStep({ runId, stepId: "step_2" });
    await harness!.waitForRun(runId, ["completed"]);
    const audit = await harness!.app.db.pool.query(
      "select actor, step_id from audit_entries where run_id = $1 and action = 'task.cancelled' order by id",
      [runId],
    );
    expect(audit.rows).toEqual([
      { actor: "tester", step_id: "step_1" },
      { actor: "tester", step_id: "step_2" },
    ]);
  });
});
