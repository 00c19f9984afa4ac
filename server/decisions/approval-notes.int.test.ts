import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readyForTaskSchema } from "../agents/contract";
import { enterPlanMode, submitPlan } from "../planner/plan-mode";
import { agentStart, agentStatus, agentUpdate } from "../operations/agent";
import type { Identity } from "../identity";
import { invokeOperation, type Operation } from "../operations/operation";
import { planApprove, planCreate } from "../operations/plans";
import { runDecide, runGet } from "../operations/runs";
import type { z } from "zod";

/**
 * Approve with a note: the note given with a plan's approval or a gate's decision is stored with
 * it, recorded in the audit, shown in the run's view, and given to the agent executing the plan
 * (`approver_notes` in its status), so an agent starting from a fresh context still sees it.
 */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const PERSON: Identity = { kind: "person", name: "alice" };
const AGENT: Identity = { kind: "agent", name: "agent-9" };

function as<I extends z.ZodType, O extends z.ZodType>(identity: Identity, operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity }, input);
}

async function auditDetail(runId: string, action: string) {
  const rows = await harness!.app.db.pool.query<{ actor: string; detail: Record<string, unknown> }>(
    "select actor, detail from audit_entries where run_id = $1 and action = $2 order by id",
    [runId, action],
  );
  return rows.rows;
}

const gatedWrite = { id: "write", description: "write a file", tool: "shell", args: { command: "echo hi > hi.txt" } };

describe("approve with a note", () => {
  it("stores a plan approval's note with the run, audits it and shows it in the run view", async () => {
    harness = await startHarness({ worker: false });
    const plan = await as(PERSON, planCreate, { draft: { goal: "note", steps: [gatedWrite] } });
    const { runId } = await as(PERSON, planApprove, {
      planId: plan.id,
      version: plan.version,
      note: "  Keep the file small; do not touch the README.  ",
    });
    const run = await as(PERSON, runGet, { runId });
    expect(run.approvedBy).toBe("alice");
    expect(run.approvalNote).toBe("Keep the file small; do not touch the README.");
    const audit = await auditDetail(runId, "plan.approved");
    expect(audit).toEqual([
      { actor: "alice", detail: expect.objectContaining({ note: "Keep the file small; do not touch the README." }) },
    ]);
  });

  it("an approval without a note has none; a note over 4000 characters is refused and starts nothing", async () => {
    harness = await startHarness({ worker: false });
    const plan = await as(PERSON, planCreate, { draft: { goal: "note", steps: [gatedWrite] } });
    await expect(
      as(PERSON, planApprove, { planId: plan.id, version: plan.version, note: "x".repeat(4001) }),
    ).rejects.toMatchObject({ code: "invalid_input" });
    expect(await harness.app.db.prisma.run.count({ where: { planId: plan.id } })).toBe(0);
    const { runId } = await as(PERSON, planApprove, { planId: plan.id, version: plan.version, note: "   " });
    expect((await as(PERSON, runGet, { runId })).approvalNote).toBeUndefined();
    expect((await auditDetail(runId, "plan.approved"))[0]!.detail).not.toHaveProperty("note");
  });

  it("a gate decided with a note keeps it with the decision and in the audit", async () => {
    harness = await startHarness({ worker: false });
    const plan = await as(PERSON, planCreate, { draft: { goal: "gate", steps: [gatedWrite] } });
    const { runId } = await as(PERSON, planApprove, { planId: plan.id, version: plan.version });
    await expect
      .poll(async () => (await as(PERSON, runGet, { runId })).steps[0])
      .toMatchObject({
        status: "awaiting_approval",
      });
    await expect(
      as(PERSON, runDecide, { runId, stepId: "write", approve: true, note: "y".repeat(4001) }),
    ).rejects.toMatchObject({ code: "invalid_input" });
    await as(PERSON, runDecide, { runId, stepId: "write", approve: true, note: " Only this once. " });
    const approvals = await harness.app.db.pool.query(
      "select actor, decision, comment from approvals where run_id = $1",
      [runId],
    );
    expect(approvals.rows).toEqual([{ actor: "alice", decision: "approved", comment: "Only this once." }]);
    const audit = await auditDetail(runId, "step.approved");
    expect(audit).toEqual([{ actor: "alice", detail: expect.objectContaining({ note: "Only this once." }) }]);
  });

  it("the executing agent's status carries the approvers' notes: the plan's and a gate's", async () => {
    harness = await startHarness();
    await fs.mkdir(path.join(harness.workspace, "src"), { recursive: true });
    const { session_id } = await as(AGENT, agentStart, { goal: "Tidy the models" });
    await as(AGENT, agentStatus, {}); // the instructions sync
    const task = { type: "chore", context_hints: ["Look in src/"], relevant_file_paths: ["src"] };
    await as(AGENT, agentUpdate, {
      payload: { add_tasks: [{ ...task, title: "Rename the models" }], update_tasks: [{ id: 1, status: "DONE" }] },
    });
    const { plan_id, run_id } = (
      await harness.app.db.pool.query("select plan_id, run_id from agent_sessions where id = $1", [session_id])
    ).rows[0];
    // Without notes, the answer has no approver_notes at all.
    const before = readyForTaskSchema.parse(await as(AGENT, agentStatus, {}));
    expect(before.now).not.toHaveProperty("approver_notes");
    // A person gates the agent's task, then approves it with a note.
    const { plan } = await harness.caller.plans.get({ planId: plan_id });
    await harness.caller.plans.edit({
      planId: plan_id,
      baseVersion: plan.version,
      edit: { kind: "updateStep", stepId: "step_2", changes: { approvalRequired: true } },
    });
    await as(PERSON, runDecide, {
      runId: run_id,
      stepId: "step_2",
      approve: true,
      note: "Keep the old names as aliases.",
    });
    const ready = readyForTaskSchema.parse(await as(AGENT, agentStatus, {}));
    expect(ready.now.current_task.id).toBe(2);
    expect(ready.now.approver_notes).toEqual([
      { about: "step_2", by: "alice", note: "Keep the old names as aliases." },
    ]);
    expect(ready.now.agent_instructions).toContain("approver_notes");
  });

  it("an agent's plan approved with a note: the agent, in a fresh context, is told the note with its task", async () => {
    harness = await startHarness();
    const entered = await enterPlanMode(harness.app, { reason: "Plan the migration", actor: AGENT.name });
    const submitted = await submitPlan(harness.app, {
      sessionId: entered.planning_session_id,
      actor: AGENT.name,
      summary: "Migrate the settings",
      steps: [
        {
          description: "Move the settings file",
          tools: [],
          risk: "low",
          context_hints: [],
          relevant_file_paths: ["."],
        },
      ],
      questions: [],
    });
    await as(PERSON, planApprove, {
      planId: submitted.plan_id,
      version: submitted.version,
      note: "Back the old file up first.",
    });
    let status = await as(AGENT, agentStatus, {});
    if (status.now.reason === "sync_instructions") status = await as(AGENT, agentStatus, {});
    const ready = readyForTaskSchema.parse(status);
    expect(ready.now.current_task.title).toBe("Move the settings file");
    expect(ready.now.approver_notes).toEqual([{ about: "plan", by: "alice", note: "Back the old file up first." }]);
  });
});
