/**
 * Sub-plans: a `run_plan` step runs another saved plan (an exact version) or a template as a
 * child run. No worker executes the step:
 *
 *   ready ──claimed──▶ running (waiting for its child) ──child completed──▶ completed (the child's outputs)
 *                                                      └─child failed/cancelled──▶ failed
 *
 * 1. At the claim (server/engine/claim.ts) the step, approved like any gated step, becomes
 *    `running` with `waiting.kind = "child_run"` and a `start_child_run` job is queued in the same
 *    transaction. The step keeps its parallelism slot while its child runs.
 * 2. The job starts the child run with `startRun`, named by (parent run, parent step) — unique, so
 *    a job run twice finds the child it made. The child is approved by the person whose approval
 *    let the step run; its own gated steps wait for their own decisions in the child run.
 * 3. The transaction that finishes the child queues `child_run_finished` with its own writes
 *    (run-transaction.ts, `runEndedJobs`); that job records the parent step's outcome.
 * 4. A run that ends cancelled or failed queues `cancel_child_runs` the same way.
 *
 * Recovery leaves such steps alone (no worker holds them): server/engine/leases.ts.
 */
import { inTransaction } from "../db";
import { AppError, isAppError } from "../errors";
import { FINISHED_RUN_STATUSES, isIn } from "../vocabulary";
import type { RunPlanArgs } from "../tools/run-plan";
import { advance, dispatch, requestApproval } from "./advance";
import { childRunApprover } from "./child-run-approver";
import { cancelRun } from "./commands";
import type { ChildPlanRequest, ChildPlanResolver, EngineDeps } from "./deps";
import { recordOutcomeIn } from "./outcome";
import { audit, requireRun } from "./run-transaction";
import { startRun } from "./start-run";

interface StartChildJob {
  runId: string;
  stepId: string;
  attempt: number;
  args: RunPlanArgs;
}

/** The `start_child_run` job: starts the child run, or fails the step saying why it cannot. */
export async function startChildRun(deps: EngineDeps, job: StartChildJob): Promise<void> {
  const parent = await deps.pool.query<{
    status: string;
    attempt: number;
    workspace_root: string;
    workspace_id: string | null;
    max_parallel: number;
    approved_by: string;
    plan_id: string;
    plan_version: number;
    child: string | null;
  }>(
    `select rs.status, rs.attempt, r.workspace_root, r.workspace_id, r.max_parallel, r.approved_by, r.plan_id,
            r.plan_version,
            (select c.id from runs c where c.parent_run_id = r.id and c.parent_step_id = rs.step_id) as child
       from run_steps rs join runs r on r.id = rs.run_id
      where rs.run_id = $1 and rs.step_id = $2`,
    [job.runId, job.stepId],
  );
  const row = parent.rows[0];
  // Already started (a job run again), or the step moved on (the run was cancelled meanwhile).
  if (!row || row.child || row.status !== "running" || row.attempt !== job.attempt) return;
  // The child's start is the effect: the policy is asked now who approves it (child-run-approver.ts).
  const approver = await childRunApprover(
    deps,
    {
      runId: job.runId,
      stepId: job.stepId,
      planId: row.plan_id,
      planVersion: row.plan_version,
      workspaceRoot: row.workspace_root,
    },
    row.approved_by,
    row.workspace_id,
    job.args,
  );
  if (!approver.ok) {
    await holdForNewDecision(deps, job, approver.reason);
    return;
  }
  const actor = approver.actor;
  try {
    const target =
      "plan_id" in job.args
        ? { planId: job.args.plan_id, version: job.args.version }
        : await resolveTemplateOrFail(deps.resolveTemplatePlan, {
            templateId: job.args.template_id,
            params: Object.fromEntries(Object.entries(job.args.params).map(([name, value]) => [name, String(value)])),
            actor,
            workspaceId: row.workspace_id,
            workspaceRoot: row.workspace_root,
          });
    const child = await startRun(deps, {
      ...target,
      actor,
      workspaceRoot: row.workspace_root,
      workspaceId: row.workspace_id,
      maxParallel: row.max_parallel,
      parent: { runId: job.runId, stepId: job.stepId },
    });
    await noteChildStarted(deps, job, { ...target, runId: child.runId }, actor);
    // The parent may have been cancelled while the child started, after its cancel job looked for
    // children: stop the child now rather than leave it running for nobody.
    const still = await deps.pool.query(
      "select 1 from run_steps where run_id = $1 and step_id = $2 and status = 'running'",
      [job.runId, job.stepId],
    );
    if (still.rowCount === 0) await cancelChildRuns(deps, { runId: job.runId, status: "cancelled" });
  } catch (error) {
    if (!isAppError(error)) throw error; // the queue retries what may pass next time
    await failWaitingStep(deps, job, `The sub-plan could not start: ${error.message}`);
  }
}

async function resolveTemplateOrFail(
  resolve: ChildPlanResolver | undefined,
  request: ChildPlanRequest,
): Promise<{ planId: string; version: number }> {
  if (!resolve) throw new AppError("invalid_state", "This process cannot start templates as sub-plans");
  return resolve(request);
}

/** The parent run tells who started which child: its timeline and audit link the two runs. */
async function noteChildStarted(
  deps: EngineDeps,
  job: StartChildJob,
  child: { runId: string; planId: string; version: number },
  actor: string,
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, job.runId);
    await client.query(
      `update run_steps set waiting = jsonb_build_object('kind', 'child_run', 'runId', $3::text)
        where run_id = $1 and step_id = $2 and status = 'running'`,
      [job.runId, job.stepId, child.runId],
    );
    tx.events.push({
      type: "child_run.started",
      stepId: job.stepId,
      data: { childRunId: child.runId, planId: child.planId, version: child.version },
    });
    await audit(tx, actor, "run.child_started", job.stepId, { childRunId: child.runId, planId: child.planId });
    await tx.flush();
  });
}

/**
 * The child did not start because its approver may not approve it now: the parent step goes back
 * to waiting for a decision (as at a claim, approval-binding.ts), giving back the parallelism slot
 * it held while running, with the reason on the step and in the audit.
 */
async function holdForNewDecision(deps: EngineDeps, job: StartChildJob, reason: string): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, job.runId);
    const current = await client.query(
      "select 1 from run_steps where run_id = $1 and step_id = $2 and status = 'running' and attempt = $3 for update",
      [job.runId, job.stepId, job.attempt],
    );
    if (current.rowCount === 0) return;
    await tx.loadStatuses([job.stepId]);
    tx.setStatus(job.stepId, "ready");
    requestApproval(tx, job.stepId, tx.now, reason);
    tx.run.active_steps--;
    await audit(tx, "stepwise", "run.child_held", job.stepId, { reason });
    await dispatch(tx);
    await tx.flush();
  });
}

async function failWaitingStep(deps: EngineDeps, job: { runId: string; stepId: string }, error: string) {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, job.runId);
    await tx.loadStatuses([job.stepId]);
    const current = await client.query<{ attempt: number; started_at: Date | null }>(
      "select attempt, started_at from run_steps where run_id = $1 and step_id = $2 and status = 'running' for update",
      [job.runId, job.stepId],
    );
    const step = current.rows[0];
    if (!step) return;
    const duration = step.started_at ? tx.now.getTime() - step.started_at.getTime() : 0;
    await recordOutcomeIn(tx, job.stepId, step.attempt, { ok: false, error, retryable: false }, duration, deps);
    await tx.flush();
  });
}

/** The `child_run_finished` job: the parent step completes with the child's outputs, or fails. */
export async function recordChildRunFinished(
  deps: EngineDeps,
  job: { parentRunId: string; parentStepId: string; childRunId: string },
): Promise<void> {
  const child = await deps.pool.query<{ status: string; reason: string | null; plan_id: string; plan_version: number }>(
    "select status, reason, plan_id, plan_version from runs where id = $1",
    [job.childRunId],
  );
  const run = child.rows[0];
  if (!run || !isIn(FINISHED_RUN_STATUSES, run.status)) return;
  const outputs = await deps.pool.query<{ step_id: string; result: { ok: boolean; value?: unknown } | null }>(
    "select step_id, result from run_steps where run_id = $1 and status = 'completed' order by position",
    [job.childRunId],
  );
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, job.parentRunId);
    const current = await client.query<{ attempt: number; started_at: Date | null }>(
      `select attempt, started_at from run_steps
        where run_id = $1 and step_id = $2 and status = 'running' and waiting->>'kind' = 'child_run' for update`,
      [job.parentRunId, job.parentStepId],
    );
    const step = current.rows[0];
    if (!step) return; // cancelled with its run, or recorded by an earlier delivery
    await tx.loadStatuses([job.parentStepId]);
    const duration = step.started_at ? tx.now.getTime() - step.started_at.getTime() : 0;
    const outcome =
      run.status === "completed"
        ? {
            ok: true as const,
            value: {
              run_id: job.childRunId,
              plan_id: run.plan_id,
              version: run.plan_version,
              status: "completed" as const,
              outputs: Object.fromEntries(outputs.rows.map((row) => [row.step_id, row.result?.value ?? null])),
            },
          }
        : {
            ok: false as const,
            error: `Sub-plan run ${job.childRunId} ${run.status}${run.reason ? `: ${run.reason}` : ""}`,
            retryable: false,
          };
    await recordOutcomeIn(tx, job.parentStepId, step.attempt, outcome, duration, deps, false);
    await advance(tx, [job.parentStepId]);
    await tx.flush();
  });
}

/** The `cancel_child_runs` job: a cancelled or failed parent run stops its children. */
export async function cancelChildRuns(deps: EngineDeps, job: { runId: string; status: string }): Promise<void> {
  const children = await deps.pool.query<{ id: string }>(
    "select id from runs where parent_run_id = $1 and status <> all($2::text[])",
    [job.runId, FINISHED_RUN_STATUSES],
  );
  for (const child of children.rows) {
    await cancelRun(deps, {
      runId: child.id,
      actor: "stepwise",
      actorKind: "system",
      reason: `Its parent run ${job.runId} ${job.status === "cancelled" ? "was cancelled" : "failed"}`,
    }).catch((error: unknown) => {
      // Finished meanwhile: nothing left to stop.
      if (!(isAppError(error) && error.code === "invalid_state")) throw error;
    });
  }
}
