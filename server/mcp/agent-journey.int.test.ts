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

/** A tool's JSON answer, read loosely: each test checks the fields it relies on. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Answer = Record<string, any>;

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
    return result.body as Answer;
  };
  const toolNames = async () => (await client.listTools()).tools.map((tool) => tool.name).sort();
  return { client, call, ok, toolNames, listChanges: () => listChanges };
}

async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, what: string): Promise<T> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** The agent's status until it is something other than the instructions sync. */
async function statusOf(ok: (name: string) => Promise<Answer>) {
  let status = await ok("status");
  if (status.now?.reason === "sync_instructions") status = await ok("status");
  return status;
}

describe("an agent's plan, from plan mode to done", () => {
  it("plan mode lists and accepts only read-only and plan-mode tools, and says so when refusing", async () => {
    const agent = await connect();
    const before = await agent.toolNames();
    // workspace_register is a person's: an agent never sees it, in plan mode or out.
    expect(before).not.toContain("workspace_register");
    for (const name of ["start", "update", "plan_edit", "run_cancel", "template_delete"]) {
      expect(before).toContain(name);
    }
    await agent.ok("enter_plan_mode", { reason: "A risky migration" });
    await waitFor(
      async () => agent.listChanges(),
      (count) => count >= 1,
      "tools/list_changed on entering",
    );
    const inPlanMode = await agent.toolNames();
    for (const name of ["start", "update", "plan_edit", "run_cancel", "template_delete", "enter_plan_mode"]) {
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
    const refused = await agent.call("template_delete", { templateId: "00000000-0000-4000-8000-000000000000" });
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
      steps: [
        { description: "Read the configuration", relevant_file_paths: ["."] },
        { description: "Change the configuration", relevant_file_paths: ["."], risk: "medium" },
      ],
    });
    // Still in plan mode while the plan waits for review.
    expect(await agent.toolNames()).not.toContain("update");
    const caller = harness!.caller;
    const sessionId = entered.planning_session_id as string;
    expect(await caller.planner.command({ command: "/plan status", sessionId })).toMatchObject({
      phase: "waiting_for_review",
      message: expect.stringContaining("is waiting for your review"),
    });

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
      steps: [
        { description: "First task", relevant_file_paths: ["."] },
        { description: "Second task", relevant_file_paths: ["."] },
      ],
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

/** Shortened limits for one test; the timers read them when they are set. */
async function withLimits(limits: Record<string, string>, work: () => Promise<void>) {
  const saved = Object.fromEntries(Object.keys(limits).map((name) => [name, process.env[name]]));
  Object.assign(process.env, limits);
  try {
    await work();
  } finally {
    for (const [name, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  }
}

async function auditActions(action: string) {
  const rows = await harness!.app.db.pool.query<{ actor: string; detail: Record<string, unknown> }>(
    "select actor, detail from audit_entries where action = $1 order by id",
    [action],
  );
  return rows.rows;
}

describe("nothing in an agent's journey waits for ever", () => {
  it("an unanswered ask_user cancels plan mode after STEPWISE_AGENT_ANSWER_TIMEOUT_MS", async () => {
    await withLimits({ STEPWISE_AGENT_ANSWER_TIMEOUT_MS: "5000" }, async () => {
      const agent = await connect();
      const entered = await agent.ok("enter_plan_mode", { reason: "Needs a decision" });
      const sessionId = entered.planning_session_id as string;
      const asked = await agent.ok("ask_user", { question: "Which database?", wait_seconds: 0 });
      expect(asked.status).toBe("pending");
      const view = await harness!.caller.planner.session({ sessionId });
      expect(view.deadline).toMatchObject({ kind: "answer" });
      expect(Date.parse(view.deadline!.at)).toBeGreaterThan(Date.parse(view.questions[0]!.askedAt));
      const ended = await waitFor(
        () => harness!.caller.planner.session({ sessionId }),
        (session) => session.status === "cancelled",
        "the question to time out",
      );
      // Named as what it is: a timeout, on the agent's question (not the built-in planner's).
      expect(ended.failure).toMatchObject({ kind: "answer_timeout", error_type: "timeout" });
      expect(await auditActions("planning.timed_out")).toHaveLength(1);
      const late = await agent.call("get_answer", { question_id: asked.question_id, wait_seconds: 0 });
      expect(late.isError).toBe(true);
      expect(late.body.detail).toContain("Nobody answered the agent's question");
      // Plan mode is over: every tool is back.
      expect(await agent.toolNames()).toContain("update");
    });
  });

  it("a submitted plan nobody reviews is rejected as timed out after STEPWISE_PLAN_REVIEW_TIMEOUT_MS", async () => {
    await withLimits({ STEPWISE_PLAN_REVIEW_TIMEOUT_MS: "5000" }, async () => {
      const agent = await connect();
      const entered = await agent.ok("enter_plan_mode", { reason: "Review me" });
      const submitted = await agent.ok("submit_plan", {
        summary: "One step",
        steps: [{ description: "Do it", relevant_file_paths: ["."] }],
      });
      const view = await harness!.caller.planner.session({ sessionId: entered.planning_session_id });
      expect(view.deadline).toMatchObject({ kind: "review" });
      const review = await waitFor(
        () => agent.ok("plan_review_status", { plan_id: submitted.plan_id }),
        (answer) => answer.state !== "awaiting_review",
        "the review to time out",
      );
      expect(review).toMatchObject({ state: "rejected", reviewed_by: "stepwise" });
      expect(review.comment).toContain("Nobody reviewed the plan");
      const [entry] = await auditActions("plan.review_timed_out");
      expect(entry).toMatchObject({ actor: "stepwise", detail: { sessionId: entered.planning_session_id } });
      const inbox = await harness!.caller.inbox.list();
      expect(inbox.items.some((item) => item.kind === "plan_review")).toBe(false);
      expect(inbox.items.find((item) => item.kind === "timed_out")).toMatchObject({ action: "plan.review_timed_out" });
      expect(await agent.toolNames()).toContain("update");
    });
  });

  it("a plan sent back for changes waits on the agent, not the reviewer: its review timer rejects nothing", async () => {
    await withLimits({ STEPWISE_PLAN_REVIEW_TIMEOUT_MS: "3000" }, async () => {
      const agent = await connect();
      await agent.ok("enter_plan_mode", { reason: "Review me, then wait" });
      const submitted = await agent.ok("submit_plan", {
        summary: "One step",
        steps: [{ description: "Do it", relevant_file_paths: ["."] }],
      });
      await harness!.caller.plans.review({
        planId: submitted.plan_id,
        version: submitted.version,
        decision: "request_changes",
        comment: "Say which file",
      });
      // The timer fires (its job leaves the queue) and finds the version sent back.
      await waitFor(
        async () =>
          (
            await harness!.app.db.pool.query("select 1 from graphile_worker.jobs where key = $1", [
              `plan-review:${submitted.plan_id}:${submitted.version}`,
            ])
          ).rowCount,
        (count) => count === 0,
        "the review timer to fire",
      );
      expect(await agent.ok("plan_review_status", { plan_id: submitted.plan_id })).toMatchObject({
        state: "changes_requested",
      });
      expect(await auditActions("plan.review_timed_out")).toHaveLength(0);
    });
  });

  it("an agent that stops calling while it gathers is timed out after STEPWISE_PLANNING_IDLE_TIMEOUT_MS", async () => {
    await withLimits({ STEPWISE_PLANNING_IDLE_TIMEOUT_MS: "5000" }, async () => {
      const agent = await connect();
      const entered = await agent.ok("enter_plan_mode", { reason: "Then silence" });
      const sessionId = entered.planning_session_id as string;
      expect((await harness!.caller.planner.session({ sessionId })).deadline).toMatchObject({ kind: "idle" });
      const ended = await waitFor(
        () => harness!.caller.planner.session({ sessionId }),
        (session) => session.status === "cancelled",
        "the idle timeout",
      );
      expect(ended.failure).toMatchObject({ kind: "idle_timeout", error_type: "timeout" });
      const [entry] = await auditActions("planning.timed_out");
      expect(entry).toMatchObject({ actor: "stepwise", detail: { reason: "idle", sessionId } });
    });
  });

  it("an MCP session's todo plan ends with the session: its run is cancelled as abandoned", async () => {
    const agent = await connect();
    const plan = await agent.ok("planning_setup_plan", { objective: "Short-lived", initial_steps: ["One", "Two"] });
    await agent.ok("planning_update_step", { step_id: 1, status: "in_progress" });
    const transport = agent.client.transport as StreamableHTTPClientTransport;
    await transport.terminateSession();
    const run = await harness!.waitForRun(plan.run_id as string, ["cancelled"]);
    expect(run.status).toBe("cancelled");
    const [entry] = await auditActions("todo.abandoned");
    expect(entry).toMatchObject({ actor: "stepwise", detail: { runCancelled: true } });
    const closed = await harness!.app.db.pool.query("select closed_at from agent_sessions where run_id = $1", [
      plan.run_id,
    ]);
    expect(closed.rows[0].closed_at).not.toBeNull();
  });

  it("a done todo step can be set back to pending or in progress", async () => {
    const agent = await connect();
    await agent.ok("planning_setup_plan", { objective: "Reopen", initial_steps: ["First", "Second"] });
    await agent.ok("planning_update_step", { step_id: 1, status: "done" });
    const completed = await agent.ok("planning_update_step", { step_id: 2, status: "done" });
    expect(completed.status).toBe("completed");
    const reopened = await agent.ok("planning_update_step", { step_id: 1, status: "pending" });
    expect(reopened).toMatchObject({
      status: "active",
      steps: [
        { step_id: 1, status: "pending" },
        { step_id: 2, status: "done" },
      ],
    });
    expect(reopened.run_id).not.toBe(completed.run_id);
    const working = await agent.ok("planning_update_step", { step_id: 1, status: "in_progress" });
    expect(working.steps[0]).toMatchObject({ step_id: 1, status: "in_progress" });
    await agent.ok("planning_update_step", { step_id: 2, status: "in_progress" });
    const again = await agent.ok("planning_read_plan");
    expect(again.steps.map((step: { status: string }) => step.status)).toEqual(["in_progress", "in_progress"]);
    await agent.ok("planning_update_step", { step_id: 1, status: "done" });
    const done = await agent.ok("planning_update_step", { step_id: 2, status: "done" });
    expect(done.status).toBe("completed");
    expect(await auditActions("todo.reopened")).toHaveLength(2);
  });
});

describe("a person's message while an agent plans", () => {
  it("comes with the agent's next answer, once, and only while the session is open", async () => {
    const agent = await connect();
    const entered = await agent.ok("enter_plan_mode", { reason: "Plan the migration" });
    const sessionId = entered.planning_session_id as string;
    await harness!.caller.planner.message({ sessionId, message: "Keep the old table until Friday" });
    const result = await agent.client.callTool({ name: "plan_list", arguments: {} });
    const texts = (result.content as { text: string }[]).map((block) => block.text);
    expect(texts.at(-1)).toContain("Keep the old table until Friday");
    expect(texts.at(-1)).toContain("tester");
    // Delivered once.
    const next = await agent.client.callTool({ name: "plan_list", arguments: {} });
    expect((next.content as { text: string }[]).some((block) => block.text.includes("Friday"))).toBe(false);
    const view = await harness!.caller.planner.session({ sessionId });
    expect(view.messages).toMatchObject([{ message: "Keep the old table until Friday", author: "tester" }]);
    expect(view.messages[0]!.deliveredAt).not.toBeNull();
    expect(await auditActions("planning.message")).toHaveLength(1);

    await expect(harness!.caller.planner.message({ sessionId, message: "   " })).rejects.toThrow("empty");
    await agent.ok("exit_plan_mode");
    await expect(harness!.caller.planner.message({ sessionId, message: "Too late" })).rejects.toThrow(
      "messages join only while it plans",
    );
    expect((await harness!.caller.planner.session({ sessionId })).messages).toHaveLength(1);
  });
});
