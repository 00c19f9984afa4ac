import { describeCondition, evaluateCondition, references } from "../plans/conditions";
import type { StepResult } from "../vocabulary";
import type { EngineStep } from "./graph";
import type { RunTransaction } from "./run-transaction";

export type ConditionVerdict = { kind: "run" } | { kind: "skipped"; reason: string };

/**
 * Whether a step whose dependencies are satisfied runs, by its `when`. Decided once, when the step
 * would otherwise become ready or wait for approval: a false condition skips it with the reason,
 * and its dependents follow the rule for skipped steps (scheduler.ts: satisfied, unless they use its
 * output). A condition reads `.status` of any step; any other field of a step that did not complete
 * makes the condition false with the reason "step_2 did not complete (failed)".
 */
export async function conditionVerdict(tx: RunTransaction, step: EngineStep): Promise<ConditionVerdict> {
  const condition = step.condition;
  if (!condition) return { kind: "run" };
  const ids = [...new Set(references(condition).map((ref) => ref.stepId))];
  await tx.loadStatuses(ids);
  const outputs = await recordedOutputs(
    tx,
    ids.filter((id) => tx.statuses.get(id) === "completed"),
  );
  const verdict = evaluateCondition(condition, (id) => {
    const status = tx.statuses.get(id);
    return status === undefined ? undefined : { status, output: outputs.get(id) };
  });
  if (!verdict.ok) return { kind: "skipped", reason: `Condition not met: ${verdict.reason}` };
  if (!verdict.value) return { kind: "skipped", reason: `Condition not met: ${describeCondition(condition)}` };
  return { kind: "run" };
}

/** The outputs of completed steps, read after the transaction's own unwritten results are written. */
export async function recordedOutputs(tx: RunTransaction, stepIds: string[]): Promise<Map<string, unknown>> {
  if (stepIds.length === 0) return new Map();
  if (tx.hasPendingWrites(stepIds)) await tx.flushStatusesOnly();
  const rows = await tx.client.query<{ step_id: string; result: StepResult | null }>(
    "select step_id, result from run_steps where run_id = $1 and step_id = any($2)",
    [tx.run.id, stepIds],
  );
  return new Map(rows.rows.filter((row) => row.result?.ok).map((row) => [row.step_id, row.result!.value]));
}
