import { inTransaction } from "../db";
import { AppError } from "../errors";
import type { Step, StepStatus } from "../plan-schema";
import { advance, unblockDependents } from "./advance";
import { carryDecisionsToCurrentVersion, runStepDefinitionHash } from "./approval-binding";
import { onFailedStep, reopenRun } from "./failed-steps";
import type { EngineDeps } from "./deps";
import { audit, loadPlanSteps, requireRun, type RunTransaction } from "./run-transaction";
import type { GraphStep } from "./scheduler";
import { NOT_STARTED_STEP_STATUSES } from "../vocabulary";

/**
 * Applies a recovery that changed the plan (new arguments for the failed step, or steps inserted
 * before it): the run moves to `newVersion`, new steps join it as pending, and the failed step is
 * decided again — so a gated step needs a fresh approval for its changed definition. Approvals of
 * the steps that did not change are carried over. Nothing that already completed runs again.
 */
export async function adoptPlanVersion(
  deps: EngineDeps,
  input: {
    runId: string;
    stepId: string;
    newVersion: number;
    insertedStepIds: string[];
    actor: string;
    detail: object;
  },
): Promise<void> {
  await onFailedStep(deps, input, "recovered", async (tx) => {
    const oldVersion = tx.run.plan_version;
    const steps = await loadPlanSteps(tx.client, tx.run.plan_id, input.newVersion);
    tx.graph = await deps.graphs.get(tx.run.plan_id, input.newVersion, async () => steps);
    tx.run.plan_version = input.newVersion;
    await tx.client.query("update runs set plan_version = $2 where id = $1", [tx.run.id, input.newVersion]);
    await tx.client.query(
      `insert into run_steps (run_id, step_id, position, tool, status, depends_on)
       select $1, s.id, 0, s.tool, 'pending', s.depends_on
       from jsonb_to_recordset($2::jsonb) as s(id text, tool text, depends_on text[])`,
      [
        tx.run.id,
        JSON.stringify(
          steps
            .filter((step) => input.insertedStepIds.includes(step.id))
            .map((step) => ({ id: step.id, tool: step.tool, depends_on: step.dependsOn })),
        ),
      ],
    );
    // Plan order may have changed around the inserted steps; dispatch follows it.
    await tx.client.query(
      `update run_steps rs set position = s.position, depends_on = s.depends_on
       from jsonb_to_recordset($2::jsonb) as s(id text, position int, depends_on text[])
       where rs.run_id = $1 and rs.step_id = s.id`,
      [
        tx.run.id,
        JSON.stringify(steps.map((step, position) => ({ id: step.id, position, depends_on: step.dependsOn }))),
      ],
    );
    // The failed step is decided again whatever changed; the others keep a decision only where
    // their definition is identical.
    await carryDecisionsToCurrentVersion(
      tx,
      oldVersion,
      steps.filter((step) => step.id !== input.stepId).map((step) => step.id),
    );
    for (const id of input.insertedStepIds) tx.statuses.set(id, "pending");
    tx.run.open_steps += input.insertedStepIds.length;
    tx.setStatus(input.stepId, "pending", "");
    tx.run.open_steps++;
    await unblockDependents(tx, input.stepId);
    reopenRun(tx, `Recovery of ${input.stepId} applied by ${input.actor}`);
    tx.events.push({
      type: "run.plan_changed",
      stepId: input.stepId,
      data: { planVersion: input.newVersion, previousVersion: oldVersion, insertedStepIds: input.insertedStepIds },
    });
    await audit(tx, input.actor, "step.recovered", input.stepId, { ...input.detail, planVersion: input.newVersion });
    await advance(tx, [], [...input.insertedStepIds, input.stepId]);
  });
}

/**
 * Moves an agent session's run to a newer version of its plan — tasks the agent added, or a
 * person's edit in the browser. New steps join as pending; steps that have not started and whose
 * definition or dependencies changed are decided again (a changed gated step needs a new
 * approval); steps removed from the plan that have not started are cancelled; nothing that
 * started or finished is touched. A finished run with new work is reopened.
 */
export async function adoptPlanVersionIntoRun(
  deps: EngineDeps,
  input: { runId: string; version: number; actor: string },
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (input.version <= tx.run.plan_version) return;
    if (tx.run.status === "cancelled") throw new AppError("invalid_state", "The session's run was cancelled");
    await adoptVersionIn(deps, tx, input.version, input.actor);
    await tx.flush();
  });
}

const NOT_STARTED: ReadonlySet<StepStatus> = new Set(NOT_STARTED_STEP_STATUSES);

export async function adoptVersionIn(
  deps: EngineDeps,
  tx: RunTransaction,
  version: number,
  actor: string,
): Promise<void> {
  const oldVersion = tx.run.plan_version;
  const oldGraph = tx.graph;
  const steps = await loadPlanSteps(tx.client, tx.run.plan_id, version);
  tx.graph = await deps.graphs.get(tx.run.plan_id, version, async () => steps);
  tx.run.plan_version = version;
  await tx.client.query("update runs set plan_version = $2 where id = $1", [tx.run.id, version]);
  const current = await tx.client.query<{ step_id: string; status: StepStatus; queued: boolean }>(
    "select step_id, status, queued from run_steps where run_id = $1",
    [tx.run.id],
  );
  const existing = new Map(current.rows.map((row) => [row.step_id, row]));
  for (const row of current.rows) tx.statuses.set(row.step_id, row.status);
  const inserted = steps.filter((step) => !existing.has(step.id));
  await tx.client.query(
    `insert into run_steps (run_id, step_id, position, tool, status, depends_on, reason)
     select $1, s.id, 0, s.tool, s.status, s.depends_on, s.reason
     from jsonb_to_recordset($2::jsonb) as s(id text, tool text, status text, depends_on text[], reason text)`,
    [
      tx.run.id,
      JSON.stringify(
        inserted.map((step) => ({
          id: step.id,
          tool: step.tool,
          depends_on: step.dependsOn,
          status: step.skipped ? "skipped" : "pending",
          reason: step.skipped ? "Skipped by the reviewer" : null,
        })),
      ),
    ],
  );
  await tx.client.query(
    `update run_steps rs set position = s.position, depends_on = s.depends_on
     from jsonb_to_recordset($2::jsonb) as s(id text, position int, depends_on text[])
     where rs.run_id = $1 and rs.step_id = s.id`,
    [tx.run.id, JSON.stringify(steps.map((step, position) => ({ id: step.id, position, depends_on: step.dependsOn })))],
  );
  const reconsider: string[] = [];
  for (const step of inserted) {
    tx.statuses.set(step.id, step.skipped ? "skipped" : "pending");
    if (!step.skipped) {
      tx.run.open_steps++;
      reconsider.push(step.id);
    }
  }
  const unchanged: string[] = [];
  for (const [id, row] of existing) {
    const before = oldGraph.steps.get(id);
    const after = tx.graph.steps.get(id);
    if (!NOT_STARTED.has(row.status)) {
      // Started or finished steps keep their status, but a decision only if their definition is
      // identical: a failed step edited now and retried later needs a new approval.
      if (after && before && sameDefinition(tx, before, after)) unchanged.push(id);
      continue;
    }
    if (!after || after.skipped) {
      tx.setStatus(
        id,
        after ? "skipped" : "cancelled",
        after ? "Skipped by the reviewer" : `Removed from the plan in version ${version}`,
      );
      tx.run.open_steps--;
      continue;
    }
    if (before && sameDefinition(tx, before, after)) {
      unchanged.push(id);
      continue;
    }
    // Decided again from pending: its gate or its dependencies may have changed.
    if (row.status !== "pending") tx.setStatus(id, "pending", "");
    reconsider.push(id);
  }
  // Approvals hold for exactly the definition approved: only unchanged steps keep theirs.
  await carryDecisionsToCurrentVersion(tx, oldVersion, unchanged);
  if (tx.run.open_steps > 0 && (tx.run.status === "completed" || tx.run.status === "failed")) {
    tx.run.status = "running";
    tx.events.push({ type: "run.running", data: { status: "running", reason: `New work in version ${version}` } });
  }
  tx.events.push({
    type: "run.plan_changed",
    data: { planVersion: version, previousVersion: oldVersion, insertedStepIds: inserted.map((step) => step.id) },
  });
  await audit(tx, actor, "run.plan_adopted", null, { planVersion: version, previousVersion: oldVersion });
  await advance(tx, [], reconsider);
}

/** Same effect (the definition hash) and the same gate: nothing for a person to decide again. */
function sameDefinition(tx: RunTransaction, a: Step & GraphStep, b: Step & GraphStep): boolean {
  return a.gated === b.gated && runStepDefinitionHash(tx, a) === runStepDefinitionHash(tx, b);
}
