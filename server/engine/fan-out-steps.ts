import type pg from "pg";
import type { Step } from "../plan-schema";
import { instanceDefinition, parseInstanceId } from "../fan-out-instance";

/**
 * A run's steps as code outside the engine's transactions reads them (approval views, the gate
 * check's facts): the plan version's, plus the fan-out instances among `wanted` — each its
 * template's definition with its element written in, exactly as the engine runs and hashes it.
 */
export async function withInstanceSteps(
  db: Pick<pg.ClientBase, "query">,
  runId: string,
  planSteps: Step[],
  wanted: readonly string[],
): Promise<Step[]> {
  const known = new Set(planSteps.map((step) => step.id));
  const missing = wanted.filter((id) => !known.has(id) && parseInstanceId(id));
  if (missing.length === 0) return planSteps;
  const rows = await db.query<{ step_id: string; template_id: string; item: unknown }>(
    "select step_id, template_id, item from run_steps where run_id = $1 and step_id = any($2) and template_id is not null",
    [runId, missing],
  );
  const templates = new Map(planSteps.map((step) => [step.id, step]));
  const instances = rows.rows.flatMap((row) => {
    const template = templates.get(row.template_id);
    if (!template) return [];
    return [instanceDefinition(template, parseInstanceId(row.step_id)!.index, row.item)];
  });
  return [...planSteps, ...instances];
}
