import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { askUser, enterPlanMode, submitPlan } from "./plan-mode";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";

/**
 * The Planning list's states, reject (both kinds of planning session), archive / restore, and the
 * inbox, against real PostgreSQL: sessions are made the way the planner and plan mode make them.
 */
let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

const AGENT = "coder";
const agentPlan = {
  summary: "Add the flag",
  steps: [
    {
      description: "Edit the parser",
      context_hints: [],
      relevant_file_paths: ["."],
      tools: ["edit"],
      risk: "low" as const,
    },
  ],
  questions: [],
};

async function externalSession(reason: string) {
  const entered = await enterPlanMode(harness.app, { reason, actor: AGENT });
  return entered.planning_session_id;
}

async function submittedExternal(reason: string) {
  const sessionId = await externalSession(reason);
  const submitted = await submitPlan(harness.app, { sessionId, actor: AGENT, ...agentPlan });
  return { sessionId, planId: submitted.plan_id, version: submitted.version };
}

/** A built-in planner session as the planner stores it once its plan passed the gates. */
async function builtInCompletedSession(goal: string, status = "completed") {
  const plan = await harness.caller.plans.createFromJson({
    planJson: JSON.stringify({ goal, steps: [{ id: "step_1", description: "say", tool: "echo", args: { value: 1 } }] }),
    source: "llm",
  });
  const sessionId = randomUUID();
  await harness.app.db.pool.query(
    `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor, plan_id, result_version, finished_at)
     values ($1, 'create', 'quick', $2, $3, 'compatible:m', $4, $5, 'tester', $6, 1, now())`,
    [sessionId, status, goal, harness.workspace, plan.traceId, plan.id],
  );
  return { sessionId, planId: plan.id, version: plan.version };
}

async function stateOf(sessionId: string) {
  const state = await harness.caller.planning.state({ sessionId });
  if (!state) throw new Error(`no session ${sessionId}`);
  return state;
}

describe("planning list", () => {
  it("says each session's state and what it waits for, newest first, filterable by state", async () => {
    const gathering = await externalSession("Gathering context");
    const waiting = await externalSession("Needs an answer");
    await askUser(harness.app, { sessionId: waiting, actor: AGENT, question: "Which branch?", wait_seconds: 0 });
    const submitted = await submittedExternal("Submitted for review");
    const approved = await submittedExternal("Approved and running");
    await harness.caller.plans.approve({ planId: approved.planId, version: approved.version });
    const rejected = await builtInCompletedSession("Rejected by the person");
    await harness.caller.plans.review({
      planId: rejected.planId,
      version: 1,
      decision: "reject",
      comment: "Too risky",
    });
    const failed = randomUUID();
    const cancelled = randomUUID();
    for (const [id, status] of [
      [failed, "failed"],
      [cancelled, "cancelled"],
    ]) {
      await harness.app.db.pool.query(
        `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor)
         values ($1, 'create', 'deep', $2, $3, 'compatible:m', $4, $5, 'tester')`,
        [id, status, `A ${status} session`, harness.workspace, randomUUID()],
      );
    }

    expect(await stateOf(gathering)).toMatchObject({ state: "gathering", waitsOn: "agent" });
    expect(await stateOf(waiting)).toMatchObject({
      state: "waiting",
      waitsOn: "you",
      waitsFor: "your answer: “Which branch?”",
    });
    expect(await stateOf(submitted.sessionId)).toMatchObject({
      state: "submitted",
      waitsFor: `your review of plan ${submitted.planId} v1`,
    });
    expect(await stateOf(approved.sessionId)).toMatchObject({ state: "approved", waitsFor: null });
    expect((await stateOf(approved.sessionId)).runId).toEqual(expect.any(String));
    expect(await stateOf(rejected.sessionId)).toMatchObject({ state: "rejected", waitsFor: null });
    expect(await stateOf(failed)).toMatchObject({ state: "failed" });
    expect(await stateOf(cancelled)).toMatchObject({ state: "cancelled" });

    const all = await harness.caller.planning.list({});
    const ids = all.sessions.map((session) => session.id);
    // Newest first: the two inserted last come first, the first one entered comes last of these.
    expect(ids.indexOf(cancelled)).toBeLessThan(ids.indexOf(gathering));
    expect(ids.indexOf(submitted.sessionId)).toBeLessThan(ids.indexOf(waiting));
    expect(all.counts).toMatchObject({ gathering: 1, waiting: 1, submitted: 1, approved: 1, rejected: 1, failed: 1 });

    // What waits for the person — the question and the plan to review — is counted together, as the inbox does.
    expect(all.waitingForYou).toBe(2);
    const forYou = await harness.caller.planning.list({ waitsOn: "you" });
    expect(forYou.sessions.map((session) => session.id).sort()).toEqual([waiting, submitted.sessionId].sort());
    // An agent's session is listed by what its plan does, with the agent's reason beside it.
    const listedSubmitted = all.sessions.find((session) => session.id === submitted.sessionId)!;
    expect(listedSubmitted).toMatchObject({ goal: agentPlan.summary, reason: "Submitted for review" });
    expect(all.sessions.find((session) => session.id === gathering)).toMatchObject({
      goal: "Gathering context",
      reason: "Gathering context",
    });

    const onlyWaiting = await harness.caller.planning.list({ state: "waiting" });
    expect(onlyWaiting.sessions.map((session) => session.id)).toEqual([waiting]);
    await expect(harness.caller.planning.list({ state: "bogus" as "waiting" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
  });
});

describe("reject", () => {
  it("rejects a submitted plan: audited with the reason, the session says rejected, approve is refused", async () => {
    const { sessionId, planId } = await builtInCompletedSession("Plan to reject");
    // Bad input changes nothing: a version that is not the current one.
    await expect(
      harness.caller.plans.review({ planId, version: 2, decision: "reject", comment: "" }),
    ).rejects.toMatchObject({ message: expect.stringContaining("not the current version") });
    expect(await stateOf(sessionId)).toMatchObject({ state: "submitted" });

    await harness.caller.plans.review({ planId, version: 1, decision: "reject", comment: "Wrong approach" });
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { planId, action: "plan.rejected" } });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: "tester", planVersion: 1, detail: { reason: "Wrong approach" } });
    expect(await stateOf(sessionId)).toMatchObject({ state: "rejected" });
    expect(await harness.caller.plans.lifecycle({ planId })).toMatchObject({ state: "rejected", rejectedVersion: 1 });

    await expect(harness.caller.plans.approve({ planId, version: 1 })).rejects.toMatchObject({
      message: expect.stringContaining("rejected and cannot run"),
    });
    expect(await harness.app.db.prisma.run.count({ where: { planId } })).toBe(0);
    await expect(
      harness.caller.plans.review({ planId, version: 1, decision: "reject", comment: "" }),
    ).rejects.toMatchObject({ message: expect.stringContaining("already rejected") });
    // Rejected plans leave the default list and show under the archived filter, with their state.
    expect((await harness.caller.plans.list()).map((plan) => plan.id)).not.toContain(planId);
    expect(await harness.caller.plans.list({ show: "archived" })).toContainEqual(
      expect.objectContaining({ id: planId, state: "rejected" }),
    );
  });

  it("an agent's plan rejected in the browser ends its session, and plan.review_status agrees", async () => {
    const { sessionId, planId, version } = await submittedExternal("Agent plan to reject");
    await harness.caller.plans.review({ planId, version, decision: "reject", comment: "Not now" });
    expect(await stateOf(sessionId)).toMatchObject({ state: "rejected", status: "cancelled" });
    expect(await harness.caller.plans.reviewStatus({ planId, version })).toMatchObject({
      state: "rejected",
      reviewedBy: "tester",
      comment: "Not now",
    });
    await expect(submitPlan(harness.app, { sessionId, actor: AGENT, ...agentPlan })).rejects.toMatchObject({
      code: "invalid_state",
    });
  });

  it("only a person rejects, archives or restores", async () => {
    const { planId } = await builtInCompletedSession("Agent may not decide");
    const agent = createCaller(createTrpcContext(harness.app, { kind: "agent", name: AGENT }));
    await expect(agent.plans.review({ planId, version: 1, decision: "reject", comment: "" })).rejects.toMatchObject({
      code: "FORBIDDEN",
    });
    await expect(agent.plans.archive({ planId })).rejects.toMatchObject({ code: "FORBIDDEN" });
    expect(await harness.caller.plans.lifecycle({ planId })).toMatchObject({ state: "active" });
  });
});

describe("archive and restore", () => {
  const gatedPlan = (goal: string) =>
    JSON.stringify({
      goal,
      steps: [{ id: "step_1", description: "gated", tool: "echo", args: { value: 1 }, approvalRequired: true }],
    });

  it("is refused while a run of the plan is active, hides the plan, and restore brings it back", async () => {
    const plan = await harness.caller.plans.createFromJson({ planJson: gatedPlan("Archive me") });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    await expect(harness.caller.plans.archive({ planId: plan.id })).rejects.toMatchObject({
      message: expect.stringContaining("still running"),
    });
    expect(await harness.caller.plans.lifecycle({ planId: plan.id })).toMatchObject({ state: "active" });
    expect(await harness.app.db.prisma.auditEntry.count({ where: { planId: plan.id, action: "plan.archived" } })).toBe(
      0,
    );

    await harness.caller.runs.cancel({ runId });
    await harness.waitForRun(runId, ["cancelled"]);
    await harness.caller.plans.archive({ planId: plan.id });
    expect((await harness.caller.plans.list()).map((p) => p.id)).not.toContain(plan.id);
    expect(await harness.caller.plans.list({ show: "archived" })).toContainEqual(
      expect.objectContaining({ id: plan.id, state: "archived" }),
    );
    await expect(harness.caller.plans.approve({ planId: plan.id, version: 1 })).rejects.toMatchObject({
      message: expect.stringContaining("archived and cannot run"),
    });
    await expect(harness.caller.plans.archive({ planId: plan.id })).rejects.toMatchObject({
      message: expect.stringContaining("already archived"),
    });

    await harness.caller.plans.restore({ planId: plan.id });
    expect((await harness.caller.plans.list()).map((p) => p.id)).toContain(plan.id);
    const actions = await harness.app.db.prisma.auditEntry.findMany({
      where: { planId: plan.id, action: { in: ["plan.archived", "plan.restored"] } },
      orderBy: { id: "asc" },
    });
    expect(actions.map((entry) => [entry.action, entry.actor])).toEqual([
      ["plan.archived", "tester"],
      ["plan.restored", "tester"],
    ]);
    await expect(harness.caller.plans.restore({ planId: plan.id })).rejects.toMatchObject({
      message: expect.stringContaining("nothing to restore"),
    });
    const again = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    expect(again.runId).toEqual(expect.any(String));
    await harness.caller.runs.cancel({ runId: again.runId });
  });

  it("refuses an unknown plan with not_found", async () => {
    await expect(harness.caller.plans.archive({ planId: "plan-00000000" })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
  });
});

describe("inbox", () => {
  it("gathers planning questions, plans to review, gated steps and run questions; each leaves when handled", async () => {
    const before = await harness.caller.inbox.list();
    const known = new Set(before.items.map((item) => item.id));
    const fresh = async () => (await harness.caller.inbox.list()).items.filter((item) => !known.has(item.id));

    const waiting = await externalSession("Inbox question");
    const asked = await askUser(harness.app, {
      sessionId: waiting,
      actor: AGENT,
      question: "Staging or production?",
      wait_seconds: 0,
    });
    const review = await builtInCompletedSession("Inbox plan to review");
    const gated = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "Inbox gate",
        steps: [{ id: "step_1", description: "gated", tool: "echo", args: { value: 1 }, approvalRequired: true }],
      }),
    });
    const gatedRun = await harness.caller.plans.approve({ planId: gated.id, version: 1 });
    const asking = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "Inbox ask",
        steps: [{ id: "step_1", description: "ask", tool: "ask_user", args: { question: "Name?" } }],
      }),
    });
    const askingRun = await harness.caller.plans.approve({ planId: asking.id, version: 1 });
    await expect
      .poll(async () => (await harness.caller.runs.get({ runId: askingRun.runId })).steps[0]?.status)
      .toBe("awaiting_input");

    const items = await fresh();
    expect(items.map((item) => item.kind).sort()).toEqual([
      "plan_review",
      "planning_question",
      "step_approval",
      "step_input",
    ]);
    expect(items).toContainEqual(
      expect.objectContaining({
        kind: "planning_question",
        question: "Staging or production?",
        href: `/tasks/${waiting}`,
      }),
    );
    expect(items).toContainEqual(
      expect.objectContaining({
        kind: "plan_review",
        planId: review.planId,
        version: 1,
        href: `/plans/${review.planId}`,
      }),
    );
    expect(items).toContainEqual(
      expect.objectContaining({ kind: "step_approval", runId: gatedRun.runId, stepId: "step_1" }),
    );
    expect(items).toContainEqual(expect.objectContaining({ kind: "step_input", question: "Name?" }));

    await harness.caller.planner.answer({ sessionId: waiting, questionId: asked.question_id, answer: "Staging" });
    expect((await fresh()).map((item) => item.kind)).not.toContain("planning_question");
    await harness.caller.runs.decide({ runId: gatedRun.runId, stepId: "step_1", approve: true });
    expect((await fresh()).map((item) => item.kind)).not.toContain("step_approval");
    await harness.caller.runs.answer({ runId: askingRun.runId, stepId: "step_1", answer: "Ada" });
    expect((await fresh()).map((item) => item.kind)).not.toContain("step_input");
    await harness.caller.plans.approve({ planId: review.planId, version: 1 });
    expect(await fresh()).toEqual([]);
  });

  it("the planning list's waiting-for-you is the inbox's planning items, in the cases that used to differ", async () => {
    const agree = async () => {
      const inbox = await harness.caller.inbox.list();
      const planning = inbox.items.filter((item) => item.kind === "planning_question" || item.kind === "plan_review");
      const list = await harness.caller.planning.list({ limit: 200 });
      expect(list.waitingForYou).toBe(planning.length);
      return { list, planning };
    };
    const start = await agree();

    // A plan completed twice (made, then regenerated): one plan to review, under the newer session.
    const twice = await builtInCompletedSession("Reviewed once");
    const later = randomUUID();
    // Created after the first by at least a millisecond, the timestamps' precision: two inserts
    // in the same millisecond would tie, and which one is "newer" would be left to their ids.
    await harness.app.db.pool.query(
      `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor, plan_id, result_version, finished_at, created_at)
       select $1, 'regenerate', 'quick', 'completed', 'Reviewed once', 'compatible:m', $2, $3, 'tester', $4, 1, now(),
              greatest(now(), first.created_at + interval '1 millisecond')
         from planning_sessions first where first.id = $5`,
      [later, harness.workspace, randomUUID(), twice.planId, twice.sessionId],
    );
    // A plan the planner is still revising (parked on its question, so no worker picks it up): nothing to review yet.
    const revising = await builtInCompletedSession("Being revised");
    await harness.app.db.pool.query(
      `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor, plan_id, base_version)
       values ($1, 'regenerate', 'deep', 'awaiting_answer', 'Being revised', 'compatible:m', $2, $3, 'tester', $4, 1)`,
      [randomUUID(), harness.workspace, randomUUID(), revising.planId],
    );
    // A planner's plan sent back for changes waits for a new version, not for a review.
    const sentBack = await builtInCompletedSession("Sent back");
    await harness.caller.plans.review({
      planId: sentBack.planId,
      version: 1,
      decision: "request_changes",
      comment: "Split it",
    });
    // An agent asking twice before any answer: two questions to answer.
    const asking = await externalSession("Two questions");
    for (const question of ["First?", "Second?"]) {
      await askUser(harness.app, { sessionId: asking, actor: AGENT, question, wait_seconds: 0 });
    }

    const { list, planning } = await agree();
    expect(planning.length - start.planning.length).toBe(3);
    const byId = new Map(list.sessions.map((item) => [item.id, item]));
    expect(byId.get(later)).toMatchObject({ state: "submitted", waitsOn: "you" });
    expect(byId.get(twice.sessionId)).toMatchObject({ state: "submitted", waitsOn: null });
    expect(byId.get(revising.sessionId)).toMatchObject({ state: "submitted", waitsOn: "planner" });
    expect(byId.get(sentBack.sessionId)).toMatchObject({ state: "submitted", waitsOn: null });
    expect(byId.get(asking)).toMatchObject({ state: "waiting", waitsOn: "you", openQuestions: 2 });
    expect(planning.filter((item) => item.kind === "plan_review" && item.planId === twice.planId)).toEqual([
      expect.objectContaining({ sessionId: later }),
    ]);
  });
});
