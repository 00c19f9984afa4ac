import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { stepDefinitionHash } from "../audit/definition-hash";
import { editPlan } from "../plans/edits";
import type { Step } from "../plan-schema";
import { getPlan } from "../plans/service";
import { savePlanVersion } from "../plans/versions";
import { adoptPlanVersionIntoRun, decideApproval, executeStepJob, retryStep } from "./engine";
import { applyRecoveryAction, rerunFrom } from "./recovery";

/**
 * Approvals bind to content: a person's approval (or gate waiver) covers exactly the definition it
 * was given for, and the engine checks that when it claims the step. Every path by which a step's
 * definition can change after a decision — a new plan version adopted into the run, a retry after
 * an edit, a recovery or re-run with new arguments, a decision row written behind the engine's
 * back — must end with the step back in awaiting_approval and its command not run.
 */

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const PERSON = "alice";

/**
 * These tests call the engine (decideApproval, savePlanVersion) directly, outside any caller, so
 * alice's approvals and waivers are recorded with the kind `system` — which `audit verify` rightly
 * refuses to count as a person's decision. Only the shell steps they approve or waive are excused.
 */
const DIRECT_ENGINE_CALLS = {
  reason: "engine calls outside a caller record alice's decisions as the system's",
  subjects: /step_1 \(shell\)$/,
};
const AGENT = "agent local";

/** A shell step that leaves `file` in the workspace when it runs: shell steps are gated by default. */
const writes = (id: string, file: string, text = id, extra: Partial<Step> = {}) => ({
  id,
  description: `write ${file}`,
  tool: "shell",
  args: { command: `echo ${text} > ${file}` },
  ...extra,
});

async function start(h: Harness, steps: unknown[]) {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "bind", steps }) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return { planId: plan.id, runId };
}

async function stepRow(h: Harness, runId: string, stepId: string) {
  const rows = await h.app.db.pool.query<{ status: string; attempt: number; reason: string | null; queued: boolean }>(
    "select status, attempt, reason, queued from run_steps where run_id = $1 and step_id = $2",
    [runId, stepId],
  );
  return rows.rows[0]!;
}

async function waitForStatus(h: Harness, runId: string, stepId: string, status: string) {
  await expect.poll(async () => (await stepRow(h, runId, stepId)).status, { timeout: 20_000 }).toBe(status);
}

const exists = (h: Harness, file: string) =>
  fs.access(path.join(h.workspace, file)).then(
    () => true,
    () => false,
  );

/** An agent's edit of the plan: a new version whose `stepId` runs a different command. */
async function agentEdits(h: Harness, planId: string, baseVersion: number, stepId: string, changes: Partial<Step>) {
  const base = await getPlan(h.app.db.prisma, planId, baseVersion);
  return savePlanVersion(h.app.db.prisma, h.app.tools, {
    planId,
    baseVersion,
    draft: { ...base, steps: base.steps.map((step) => (step.id === stepId ? { ...step, ...changes } : step)) },
    source: "agent",
    author: AGENT,
    changeNote: `edit ${stepId}`,
  });
}

/** Runs the job for a step now, as a worker would (the harness has no worker unless asked). */
async function claimNow(h: Harness, runId: string, stepId: string) {
  const row = await stepRow(h, runId, stepId);
  await executeStepJob(h.app.engine, { runId, stepId, attempt: row.attempt + 1 });
}

/** Copies a run's approvals to another plan version of it, hashes and all: what adoption once did. */
async function copyApprovals(h: Harness, runId: string, version: number) {
  await h.app.db.pool.query(
    `insert into approvals (run_id, step_id, plan_version, decision, actor, definition_hash)
     select run_id, step_id, $2, decision, actor, definition_hash from approvals where run_id = $1`,
    [runId, version],
  );
}

const approve = (h: Harness, runId: string, stepId: string) =>
  decideApproval(h.app.engine, { runId, stepId, approve: true, actor: PERSON });

describe("approvals bind to the definition that runs", () => {
  it("an edit adopted into the run after the approval is not covered by it: the claim refuses, the step waits again", async () => {
    harness = await startHarness({ worker: false, auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { planId, runId } = await start(h, [writes("step_1", "approved.txt")]);
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    await approve(h, runId, "step_1");
    expect((await stepRow(h, runId, "step_1")).status).toBe("ready");

    // Before any worker takes it, the agent changes the command and the new version is adopted.
    const edited = await agentEdits(h, planId, 1, "step_1", { args: { command: "echo pwned > pwned.txt" } });
    await adoptPlanVersionIntoRun(h.app.engine, { runId, version: edited.version, actor: AGENT });
    // Only the approval of version 1's definition exists; nothing was copied to the changed step.
    const approvals = await h.app.db.pool.query("select plan_version from approvals where run_id = $1", [runId]);
    expect(approvals.rows).toEqual([{ plan_version: 1 }]);
    // Even copied to the new version (as adoption once did), it is of another definition.
    await copyApprovals(h, runId, edited.version);
    await claimNow(h, runId, "step_1");

    const held = await stepRow(h, runId, "step_1");
    expect(held).toMatchObject({ status: "awaiting_approval", attempt: 0, queued: false });
    expect(held.reason).toMatch(/changed after it was approved/);
    expect(await exists(h, "pwned.txt")).toBe(false);

    // A person approving what is there now lets exactly that run.
    await approve(h, runId, "step_1");
    await claimNow(h, runId, "step_1");
    expect((await stepRow(h, runId, "step_1")).status).toBe("completed");
    expect(await exists(h, "pwned.txt")).toBe(true);
    expect(await exists(h, "approved.txt")).toBe(false);
  });

  it("adopting a new version keeps a decision only for steps whose definition hash is identical (a timeout counts)", async () => {
    harness = await startHarness({ worker: false, auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { planId, runId } = await start(h, [writes("step_1", "one.txt"), writes("step_2", "two.txt")]);
    await waitForStatus(h, runId, "step_2", "awaiting_approval");
    await approve(h, runId, "step_1");
    await approve(h, runId, "step_2");

    // The new version changes only step_2's timeout; its description changes for step_1 (no effect).
    const v2 = await agentEdits(h, planId, 1, "step_2", { timeoutSeconds: 3600 });
    const v3 = await agentEdits(h, planId, v2.version, "step_1", { description: "reworded" });
    await adoptPlanVersionIntoRun(h.app.engine, { runId, version: v3.version, actor: AGENT });
    const carried = await h.app.db.pool.query(
      "select step_id from approvals where run_id = $1 and plan_version = $2 order by step_id",
      [runId, v3.version],
    );
    expect(carried.rows).toEqual([{ step_id: "step_1" }]);

    await claimNow(h, runId, "step_1");
    await claimNow(h, runId, "step_2");
    expect((await stepRow(h, runId, "step_1")).status).toBe("completed");
    expect((await stepRow(h, runId, "step_2")).status).toBe("awaiting_approval");
    expect(await exists(h, "one.txt")).toBe(true);
    expect(await exists(h, "two.txt")).toBe(false);
  });

  it("a failed approved step edited by the agent and retried needs a new approval (the laundering path)", async () => {
    harness = await startHarness({ auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { planId, runId } = await start(h, [{ ...writes("step_1", "x.txt"), args: { command: "exit 3" } }]);
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    await approve(h, runId, "step_1");
    await h.waitForRun(runId, ["failed"]);

    const edited = await agentEdits(h, planId, 1, "step_1", { args: { command: "echo pwned > pwned.txt" } });
    await adoptPlanVersionIntoRun(h.app.engine, { runId, version: edited.version, actor: AGENT });
    // The failed step changed: its approval is not carried to the new version.
    const carried = await h.app.db.pool.query("select 1 from approvals where run_id = $1 and plan_version = $2", [
      runId,
      edited.version,
    ]);
    expect(carried.rowCount).toBe(0);
    // Even copied over (as adoption once did), it does not cover the new command at the claim.
    await copyApprovals(h, runId, edited.version);
    await retryStep(h.app.engine, { runId, stepId: "step_1", actor: AGENT });

    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    expect((await stepRow(h, runId, "step_1")).reason).toMatch(/changed after it was approved/);
    expect(await exists(h, "pwned.txt")).toBe(false);

    // Retrying an unchanged definition is covered by its approval: the control case.
    const { runId: other } = await start(h, [
      { ...writes("step_1", "y.txt"), args: { command: "test -e go.txt && echo ran > ran.txt" } },
    ]);
    await waitForStatus(h, other, "step_1", "awaiting_approval");
    await approve(h, other, "step_1");
    await h.waitForRun(other, ["failed"]);
    await fs.writeFile(path.join(h.workspace, "go.txt"), "");
    await retryStep(h.app.engine, { runId: other, stepId: "step_1", actor: PERSON });
    await h.waitForRun(other, ["completed"]);
    expect(await exists(h, "ran.txt")).toBe(true);
  });

  it("a recovery with new arguments needs a new approval, and the old one copied over does not cover it", async () => {
    harness = await startHarness({ auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { runId } = await start(h, [{ ...writes("step_1", "x.txt"), args: { command: "exit 3" } }]);
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    await approve(h, runId, "step_1");
    await h.waitForRun(runId, ["failed"]);

    const { planVersion } = await applyRecoveryAction(h.app.engine, h.app.db.prisma, {
      runId,
      stepId: "step_1",
      action: { kind: "retry", args: { command: "echo recovered > recovered.txt" } },
      actor: AGENT,
    });
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    expect(await exists(h, "recovered.txt")).toBe(false);

    // The old approval carried to the new version (as adoption once did) and the step forced
    // ready: the claim still refuses, because the approval is of another definition.
    await copyApprovals(h, runId, planVersion!);
    await h.app.db.pool.query("update run_steps set status = 'ready' where run_id = $1 and step_id = 'step_1'", [
      runId,
    ]);
    await claimNow(h, runId, "step_1");
    expect((await stepRow(h, runId, "step_1")).status).toBe("awaiting_approval");
    expect(await exists(h, "recovered.txt")).toBe(false);

    await approve(h, runId, "step_1");
    await h.waitForRun(runId, ["completed"]);
    expect(await exists(h, "recovered.txt")).toBe(true);
  });

  it("a re-run with new arguments needs a new approval; the original run's approval does not cover it", async () => {
    harness = await startHarness({ auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { runId } = await start(h, [writes("step_1", "one.txt")]);
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    await approve(h, runId, "step_1");
    await h.waitForRun(runId, ["completed"]);

    const rerun = await rerunFrom(h.app.engine, h.app.db.prisma, {
      runId,
      stepId: "step_1",
      args: { command: "echo two > two.txt" },
      actor: AGENT,
    });
    await waitForStatus(h, rerun.runId, "step_1", "awaiting_approval");
    // The first run's approval, transplanted into the re-run with its version: still another definition.
    await h.app.db.pool.query(
      `insert into approvals (run_id, step_id, plan_version, decision, actor, definition_hash)
       select $2, step_id, $3, decision, actor, definition_hash from approvals where run_id = $1`,
      [runId, rerun.runId, rerun.planVersion],
    );
    await h.app.db.pool.query("update run_steps set status = 'ready' where run_id = $1 and step_id = 'step_1'", [
      rerun.runId,
    ]);
    await claimNow(h, rerun.runId, "step_1");
    expect((await stepRow(h, rerun.runId, "step_1")).status).toBe("awaiting_approval");
    expect(await exists(h, "two.txt")).toBe(false);
  });

  it("a forged or outdated approval row does not cover the definition: the claim refuses and the step waits again", async () => {
    harness = await startHarness({ worker: false, auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { runId } = await start(h, [writes("step_1", "x.txt")]);
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    const workspace = (
      await h.app.db.pool.query<{ workspace_root: string }>("select workspace_root from runs where id = $1", [runId])
    ).rows[0]!.workspace_root;
    const plan = await getPlan(h.app.db.prisma, (await h.caller.runs.get({ runId })).planId, 1);
    const real = plan.steps[0]!;
    const forgeries = [
      // Approved for another command, another workspace, or before hashes were recorded.
      stepDefinitionHash({ ...real, args: { command: "echo harmless" } }, workspace),
      stepDefinitionHash(real, "/somewhere/else"),
      null,
    ];
    for (const hash of forgeries) {
      await h.app.db.pool.query(
        `insert into approvals (run_id, step_id, plan_version, decision, actor, definition_hash)
         values ($1, 'step_1', 1, 'approved', 'mallory', $2)`,
        [runId, hash],
      );
      await h.app.db.pool.query("update run_steps set status = 'ready' where run_id = $1 and step_id = 'step_1'", [
        runId,
      ]);
      await claimNow(h, runId, "step_1");
      const row = await stepRow(h, runId, "step_1");
      expect(row).toMatchObject({ status: "awaiting_approval", attempt: 0 });
      expect(row.reason).toMatch(/changed after it was approved/);
      expect(await exists(h, "x.txt")).toBe(false);
    }
    // The real definition's hash, as a person's decision records it, does cover it.
    expect(stepDefinitionHash(real, workspace)).not.toBe(forgeries[0]);
    await approve(h, runId, "step_1");
    await claimNow(h, runId, "step_1");
    expect((await stepRow(h, runId, "step_1")).status).toBe("completed");
    expect(await exists(h, "x.txt")).toBe(true);
  });

  it("a decision refuses to apply to a definition other than the one shown to the person", async () => {
    harness = await startHarness({ worker: false, auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const { runId } = await start(h, [writes("step_1", "x.txt")]);
    await waitForStatus(h, runId, "step_1", "awaiting_approval");
    const shown = stepDefinitionHash(
      {
        ...(await getPlan(h.app.db.prisma, (await h.caller.runs.get({ runId })).planId, 1)).steps[0]!,
        args: { command: "ls" },
      },
      h.workspace,
    );
    await expect(
      decideApproval(h.app.engine, { runId, stepId: "step_1", approve: true, actor: PERSON, definitionHash: shown }),
    ).rejects.toMatchObject({ code: "version_conflict" });
    expect((await stepRow(h, runId, "step_1")).status).toBe("awaiting_approval");
    expect((await h.app.db.pool.query("select 1 from approvals where run_id = $1", [runId])).rowCount).toBe(0);
  });
});

describe("gate waivers bind to the definition waived", () => {
  it("a waived step runs ungated only while its definition is the one a person waived", async () => {
    harness = await startHarness({ worker: false, auditExemption: DIRECT_ENGINE_CALLS });
    const h = harness;
    const plan = await h.caller.plans.createFromJson({
      planJson: JSON.stringify({ goal: "waive", steps: [writes("step_1", "waived.txt")] }),
    });
    const waived = await editPlan(h.app.db.prisma, h.app.tools, {
      planId: plan.id,
      baseVersion: 1,
      edit: { kind: "updateStep", stepId: "step_1", changes: { approvalRequired: false } },
      author: PERSON,
      editor: { kind: "person", name: PERSON, role: "approver" },
    });
    expect(waived.steps[0]!.approvalRequired).toBe(false);
    const recorded = await h.app.db.pool.query("select step_id, plan_version, actor from gate_waivers");
    expect(recorded.rows).toEqual([{ step_id: "step_1", plan_version: 2, actor: PERSON }]);

    // The waived definition itself runs without asking anyone.
    const waivedRun = await h.caller.plans.approve({ planId: plan.id, version: 2 });
    await waitForStatus(h, waivedRun.runId, "step_1", "ready");
    await claimNow(h, waivedRun.runId, "step_1");
    expect((await stepRow(h, waivedRun.runId, "step_1")).status).toBe("completed");
    expect(await exists(h, "waived.txt")).toBe(true);

    // A version that keeps the gate off but runs something else — written straight into the
    // table, as no edit path allows — is gated again at the claim.
    const forgedSteps = waived.steps.map((step) => ({ ...step, args: { command: "echo pwned > pwned.txt" } }));
    await h.app.db.pool.query(
      `insert into plan_versions (plan_id, version, goal, steps, source, trace_id, author)
       select plan_id, 3, goal, $2::jsonb, source, trace_id, 'mallory' from plan_versions where plan_id = $1 and version = 2`,
      [plan.id, JSON.stringify(forgedSteps)],
    );
    await h.app.db.pool.query("update plans set current_version = 3 where id = $1", [plan.id]);
    const forgedRun = await h.caller.plans.approve({ planId: plan.id, version: 3 });
    await waitForStatus(h, forgedRun.runId, "step_1", "ready");
    await claimNow(h, forgedRun.runId, "step_1");
    const held = await stepRow(h, forgedRun.runId, "step_1");
    expect(held.status).toBe("awaiting_approval");
    expect(held.reason).toMatch(/waived/);
    expect(await exists(h, "pwned.txt")).toBe(false);
  });
});
