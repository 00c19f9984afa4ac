import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";
import { recordAudit } from "./audit-log";
import { auditSession } from "../planner/session-rules";
import type { AuditAction } from "./actions";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

/** A caller signed in as `name`: the audit's actor must be this identity, not anyone else's. */
const as = (name: string) => createCaller(createTrpcContext(harness.app, { kind: "person", name }));

async function makePlan(steps: unknown[]) {
  return harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "Audited", steps }) });
}

const gated = [{ id: "step_1", description: "Write", tool: "write_file", args: { path: "a.txt", content: "a" } }];

/** A run (approved by `tester`) waiting at its gate. */
async function runAtGate() {
  const plan = await makePlan(gated);
  const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
  await harness.waitForStep(runId, "step_1", "awaiting_approval");
  return { planId: plan.id, version: plan.version, runId, stepId: "step_1" };
}

/** A failed step with a recovery proposal (the model's part is not under test: the row is made here). */
async function failedWithProposal() {
  const plan = await makePlan([
    { id: "step_1", description: "Read", tool: "read_file", args: { path: "missing.json" } },
  ]);
  const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
  await harness.waitForRun(runId);
  const proposal = await harness.app.db.prisma.recoveryProposal.create({
    data: {
      runId,
      stepId: "step_1",
      attempt: 1,
      status: "proposed",
      action: { kind: "skip" },
      reasoning: "-",
      model: "m",
    },
  });
  return { planId: plan.id, version: plan.version, runId, stepId: "step_1", proposalId: proposal.id };
}

interface Expected {
  action: string;
  planId: string;
  planVersion: number;
  runId: string | null;
  stepId: string | null;
}

/** Each decision a person makes, made by its own person; every one must leave an entry naming them. */
const decisions: { name: string; decide(actor: string): Promise<Expected> }[] = [
  {
    name: "approve run",
    async decide(actor) {
      const plan = await makePlan(gated);
      const { runId } = await as(actor).plans.approve({ planId: plan.id, version: plan.version });
      return { action: "plan.approved", planId: plan.id, planVersion: 1, runId, stepId: null };
    },
  },
  {
    name: "approve gate",
    async decide(actor) {
      const run = await runAtGate();
      await as(actor).runs.decide({ runId: run.runId, stepId: run.stepId, approve: true });
      return { action: "step.approved", planId: run.planId, planVersion: 1, runId: run.runId, stepId: "step_1" };
    },
  },
  {
    name: "deny gate",
    async decide(actor) {
      const run = await runAtGate();
      await as(actor).runs.decide({ runId: run.runId, stepId: run.stepId, approve: false, comment: "no" });
      return { action: "step.denied", planId: run.planId, planVersion: 1, runId: run.runId, stepId: "step_1" };
    },
  },
  {
    name: "cancel run",
    async decide(actor) {
      const run = await runAtGate();
      await as(actor).runs.cancel({ runId: run.runId });
      return { action: "run.cancelled", planId: run.planId, planVersion: 1, runId: run.runId, stepId: null };
    },
  },
  {
    name: "answer",
    async decide(actor) {
      const plan = await makePlan([
        { id: "step_1", description: "Ask", tool: "ask_user", args: { question: "Which one?" } },
      ]);
      const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
      await harness.waitForStep(runId, "step_1", "awaiting_input");
      await as(actor).runs.answer({ runId, stepId: "step_1", answer: "This one" });
      return { action: "step.answered", planId: plan.id, planVersion: 1, runId, stepId: "step_1" };
    },
  },
  {
    name: "waive gate",
    async decide(actor) {
      const plan = await makePlan(gated);
      await as(actor).plans.edit({
        planId: plan.id,
        baseVersion: plan.version,
        edit: { kind: "updateStep", stepId: "step_1", changes: { approvalRequired: false } },
      });
      return { action: "gate.waived", planId: plan.id, planVersion: 2, runId: null, stepId: "step_1" };
    },
  },
  {
    name: "accept recovery",
    async decide(actor) {
      const failed = await failedWithProposal();
      await as(actor).planner.decideRecovery({ proposalId: failed.proposalId, accept: true });
      return {
        action: "recovery.accepted",
        planId: failed.planId,
        planVersion: 1,
        runId: failed.runId,
        stepId: "step_1",
      };
    },
  },
  {
    name: "reject recovery",
    async decide(actor) {
      const failed = await failedWithProposal();
      await as(actor).planner.decideRecovery({ proposalId: failed.proposalId, accept: false });
      return {
        action: "recovery.rejected",
        planId: failed.planId,
        planVersion: 1,
        runId: failed.runId,
        stepId: "step_1",
      };
    },
  },
];

describe("every decision is an audit entry naming who made it", () => {
  it.each(decisions)("$name", async ({ name, decide }) => {
    const actor = `person ${name}`;
    const expected = await decide(actor);
    const { entries } = await harness.caller.audit.list({ actor });
    expect(entries.map((entry) => entry.action)).toContain(expected.action);
    const entry = entries.find((candidate) => candidate.action === expected.action)!;
    expect(entry).toMatchObject({ ...expected, actor });
    expect(Date.parse(entry.createdAt)).not.toBeNaN();
    // Nobody else is recorded as having made it.
    const byOthers = await harness.app.db.prisma.auditEntry.count({
      where: {
        action: expected.action,
        planId: expected.planId,
        ...(expected.stepId && { stepId: expected.stepId }),
        actor: { not: actor },
      },
    });
    expect(byOthers).toBe(0);
  });
});

describe("audit.list", () => {
  it("filters by plan, run and person, newest first, a page at a time", async () => {
    const [planA, planB] = [`plan-a-${Date.now()}`, `plan-b-${Date.now()}`];
    const [run1, run2] = [randomUUID(), randomUUID()];
    const rows = [
      { actor: "ann", planId: planA, runId: run1, action: "x.one" },
      { actor: "bob", planId: planA, runId: run1, action: "x.two" },
      { actor: "ann", planId: planA, runId: run2, action: "x.three" },
      { actor: "ann", planId: planB, runId: null, action: "x.four" },
      { actor: "bob", planId: planB, runId: null, action: "x.five" },
      { actor: "ann", planId: planA, runId: run1, action: "x.six" },
      { actor: "ann", planId: planA, runId: run1, action: "x.seven" },
    ];
    // Made-up action names: the filters and the order do not depend on what the actions are.
    for (const row of rows) {
      await recordAudit(harness.app.db.pool, { ...row, action: row.action as AuditAction, planVersion: 1 });
    }

    const actions = async (filter: Parameters<Harness["caller"]["audit"]["list"]>[0]) =>
      (await harness.caller.audit.list(filter)).entries.map((entry) => entry.action);
    expect(await actions({ planId: planA })).toEqual(["x.seven", "x.six", "x.three", "x.two", "x.one"]);
    expect(await actions({ runId: run1 })).toEqual(["x.seven", "x.six", "x.two", "x.one"]);
    expect(await actions({ planId: planB, actor: "bob" })).toEqual(["x.five"]);
    expect(await actions({ runId: run1, actor: "ann" })).toEqual(["x.seven", "x.six", "x.one"]);

    // Pages of two follow each other without gaps or repeats, and the last says there is no more.
    const seen: string[] = [];
    let cursor: string | undefined;
    let pages = 0;
    do {
      const page = await harness.caller.audit.list({ planId: planA, limit: 2, ...(cursor && { cursor }) });
      seen.push(...page.entries.map((entry) => entry.action));
      cursor = page.nextCursor ?? undefined;
      pages++;
    } while (cursor);
    expect(pages).toBe(3);
    expect(seen).toEqual(["x.seven", "x.six", "x.three", "x.two", "x.one"]);
  });

  it("links an entry about a planning session without a plan to the session, with its goal", async () => {
    const sessionId = randomUUID();
    await harness.app.db.pool.query(
      `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor)
       values ($1, 'create', 'deep', 'awaiting_answer', 'Tidy the changelog', 'compatible:m', $2, $3, 'tester')`,
      [sessionId, harness.workspace, randomUUID()],
    );
    await auditSession(
      harness.app.db.pool,
      { id: sessionId, planId: null },
      { actor: "ann", action: "planning.answered" },
    );
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "A plan with a session",
        steps: [{ id: "s", description: "d", tool: "echo", args: { value: 1 } }],
      }),
    });
    await auditSession(
      harness.app.db.pool,
      { id: sessionId, planId: plan.id },
      { actor: "ann", action: "planning.cancelled" },
    );

    const entries = (await harness.caller.audit.list({ actor: "ann" })).entries;
    expect(entries.find((entry) => entry.action === "planning.answered")).toMatchObject({
      planId: sessionId,
      planningSessionId: sessionId,
      planGoal: "Tidy the changelog",
    });
    // Under a plan that exists, the entry links to the plan as before.
    expect(entries.find((entry) => entry.action === "planning.cancelled")).toMatchObject({
      planId: plan.id,
      planningSessionId: null,
    });
  });

  it("refuses a malformed filter or cursor with a clear error", async () => {
    await expect(harness.caller.audit.list({ runId: "not-a-uuid" })).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(harness.caller.audit.list({ cursor: "1; drop table" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
  });
});
