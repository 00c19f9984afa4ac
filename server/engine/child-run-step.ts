import type { Step } from "../plan-schema";
import { MAX_PLAN_NESTING, runPlanInputSchema } from "../tools/run-plan";
import { START_CHILD_RUN_TASK } from "../queue/jobs";
import type { EngineDeps } from "./deps";
import { recordOutcomeIn } from "./outcome";
import type { RunTransaction } from "./run-transaction";
import type { GraphStep } from "./scheduler";

/**
 * Called at the claim of a `run_plan` step with its resolved arguments: the step waits for its
 * child run, which a job starts once this transaction commits.
 */
export async function beginChildRunStep(
  deps: EngineDeps,
  tx: RunTransaction,
  step: Step & GraphStep,
  attempt: number,
  resolved: { ok: true; args: unknown } | { ok: false; error: string },
): Promise<void> {
  const parsed = resolved.ok ? runPlanInputSchema.safeParse(resolved.args) : undefined;
  tx.stepRowsWrittenDirectly();
  await tx.client.query(
    "update run_steps set attempt = $3, queued = false, started_at = now() where run_id = $1 and step_id = $2",
    [tx.run.id, step.id, attempt],
  );
  if (!parsed?.success) {
    const error = resolved.ok ? `Invalid sub-plan: ${parsed!.error.issues[0]?.message}` : resolved.error;
    await recordOutcomeIn(tx, step.id, attempt, { ok: false, error, retryable: false }, 0, deps);
    return;
  }
  const depth = await nestingDepth(tx);
  if (depth >= MAX_PLAN_NESTING) {
    const error = `Sub-plans nest at most ${MAX_PLAN_NESTING} deep; this run is already ${depth} deep`;
    await recordOutcomeIn(tx, step.id, attempt, { ok: false, error, retryable: false }, 0, deps);
    return;
  }
  tx.setStatus(step.id, "running", undefined, { attempt }, { kind: "child_run" });
  await tx.client.query(`select graphile_worker.add_job($1, $2::json, job_key := $3, max_attempts := 5)`, [
    START_CHILD_RUN_TASK,
    JSON.stringify({ runId: tx.run.id, stepId: step.id, attempt, args: parsed.data }),
    `${START_CHILD_RUN_TASK}:${tx.run.id}:${step.id}:${attempt}`,
  ]);
}

/** How many runs this run is nested in (0 for a run nobody started as a sub-plan). */
async function nestingDepth(tx: RunTransaction): Promise<number> {
  const { rows } = await tx.client.query<{ depth: number }>(
    `with recursive chain(id, parent, depth) as (
       select id, parent_run_id, 0 from runs where id = $1
       union all
       select r.id, r.parent_run_id, c.depth + 1 from runs r join chain c on r.id = c.parent
        where c.depth < $2
     )
     select max(depth)::int as depth from chain`,
    [tx.run.id, MAX_PLAN_NESTING + 1],
  );
  return rows[0]?.depth ?? 0;
}
