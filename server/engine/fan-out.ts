import { DEFAULT_MAX_ITEMS, MAX_ITEMS_LIMIT } from "../plan-schema";
import { ItemFieldError } from "../fan-out-instance";
import { parseReference } from "../plans/references";
import type { StepResult } from "../vocabulary";
import { recordedOutputs } from "./conditions";
import { instanceStep, withInstances, type EngineStep } from "./graph";
import type { RunTransaction } from "./run-transaction";

/**
 * Fan-out: a step with `forEach` runs once per element of an earlier step's list. When its turn
 * comes (dependencies satisfied, condition true), the template reads the list and makes one
 * instance per element — a step row of the run (`step_3[0]`, `step_3[1]`, …) with the element,
 * its own status, attempts, logs and events — and itself becomes `running` (through `ready`, as
 * any step) as their group. The
 * instances are then decided like any step: ready, or awaiting approval when the template's tool
 * is gated; each one's definition has its element written in (graph.ts `instanceStep`), so an
 * approval binds to exactly that instance of exactly that list (docs/decisions.md). When every
 * instance has settled the template completes with their outputs in list order, or fails if any
 * failed; only then do its dependents go on.
 */

export interface FanOutStart {
  /** The template settled at once (an empty list, a list over the cap, an unreadable element). */
  settled: boolean;
  /** The instances made, to be decided like any pending step. */
  instances: string[];
}

export async function startFanOut(tx: RunTransaction, template: EngineStep): Promise<FanOutStart> {
  const list = await readList(tx, template);
  if (!list.ok) {
    failTemplate(tx, template.id, list.reason);
    return { settled: true, instances: [] };
  }
  const cap = Math.min(template.maxItems ?? DEFAULT_MAX_ITEMS, MAX_ITEMS_LIMIT);
  if (list.items.length > cap) {
    failTemplate(
      tx,
      template.id,
      `${template.forEach} has ${list.items.length} elements, more than the cap of ${cap} (maxItems); nothing ran`,
    );
    return { settled: true, instances: [] };
  }
  let instances: EngineStep[];
  try {
    instances = list.items.map((item, index) => instanceStep(template, index, item));
  } catch (error) {
    if (!(error instanceof ItemFieldError)) throw error;
    failTemplate(tx, template.id, `An element of ${template.forEach} does not fit the arguments: ${error.message}`);
    return { settled: true, instances: [] };
  }
  const ids = instances.map((step) => step.id);
  startGroup(tx, template.id, ids);
  if (instances.length === 0) {
    settleTemplate(tx, template.id, { ok: true, value: [] }, undefined);
    return { settled: true, instances: [] };
  }
  // The new rows are pending, not ready: what the hot path read under the lock still holds, and
  // they are known rows for its in-memory dispatch once they become ready.
  await tx.client.query(
    `with made as (
       insert into run_steps (run_id, step_id, position, tool, status, depends_on, template_id, item)
       select $1, i.step_id, t.position, t.tool, 'pending', '{}', $2, i.item
       from run_steps t, jsonb_to_recordset($3::jsonb) as i(step_id text, item jsonb)
       where t.run_id = $1 and t.step_id = $2
       returning 1
     ),
     grouped as (update run_steps set group_size = $4 where run_id = $1 and step_id = $2)
     update runs set fan_out_instances = fan_out_instances + $4 where id = $1`,
    [
      tx.run.id,
      template.id,
      JSON.stringify(instances.map((s) => ({ step_id: s.id, item: s.instance!.item }))),
      ids.length,
    ],
  );
  tx.run.fan_out_instances += ids.length;
  tx.graph = withInstances(tx.graph, instances);
  const position = tx.knownRows.get(template.id)?.position;
  for (const id of ids) {
    tx.statuses.set(id, "pending");
    if (position !== undefined) tx.knownRows.set(id, { attempt: 0, queued: false, position });
  }
  tx.run.open_steps += ids.length;
  return { settled: false, instances: ids };
}

/**
 * A running template whose instances have all settled completes (their outputs in list order; a
 * skipped or cancelled instance's is null) or fails when any instance failed. True when it settled.
 */
export async function settleGroupIfDone(tx: RunTransaction, templateId: string): Promise<boolean> {
  const ids = tx.graph.groups?.get(templateId);
  if (!ids) return false;
  if (await someInstanceOpen(tx, ids)) return false;
  await tx.loadStatuses(ids);
  const statuses = ids.map((id) => tx.statuses.get(id));
  if (statuses.some((status) => !status || !SETTLED.has(status))) return false;
  const failed = ids.filter((id, index) => statuses[index] === "failed" || statuses[index] === "blocked");
  if (failed.length > 0) {
    const error = `${failed.length} of ${ids.length} instances failed: ${failed.slice(0, 10).join(", ")}${failed.length > 10 ? ", …" : ""}`;
    settleTemplate(tx, templateId, { ok: false, error }, error);
    return true;
  }
  const outputs = await recordedOutputs(tx, ids);
  settleTemplate(tx, templateId, { ok: true, value: ids.map((id) => outputs.get(id) ?? null) }, undefined);
  return true;
}

const SETTLED = new Set(["completed", "failed", "skipped", "blocked", "cancelled"]);

/**
 * Whether an instance is still open, cheaply: a group of 1,000 is asked after each instance ends.
 * Statuses this transaction knows are judged in memory (they may not be written yet); the table is
 * asked for the others, newest instances first — those most likely still open — stopping at one.
 */
async function someInstanceOpen(tx: RunTransaction, ids: string[]): Promise<boolean> {
  const unknown: string[] = [];
  for (let index = ids.length - 1; index >= 0; index--) {
    const status = tx.statuses.get(ids[index]!);
    if (status === undefined) unknown.push(ids[index]!);
    else if (!SETTLED.has(status)) return true;
  }
  if (unknown.length === 0) return false;
  const open = await tx.client.query(
    `select 1 from run_steps where run_id = $1 and step_id = any($2)
       and status not in ('completed','failed','skipped','blocked','cancelled') limit 1`,
    [tx.run.id, unknown],
  );
  return open.rowCount! > 0;
}

/**
 * The template's turn has come (ready) and the engine takes it at once for its group (running),
 * in this transaction: it is never queued, and no worker runs it.
 */
function startGroup(tx: RunTransaction, templateId: string, ids: string[]): void {
  tx.setStatus(templateId, "ready");
  tx.setStatus(templateId, "running", undefined, { instances: ids });
}

function failTemplate(tx: RunTransaction, templateId: string, reason: string): void {
  startGroup(tx, templateId, []);
  settleTemplate(tx, templateId, { ok: false, error: reason }, reason);
}

function settleTemplate(
  tx: RunTransaction,
  templateId: string,
  outcome: Pick<StepResult, "ok" | "value" | "error">,
  reason: string | undefined,
): void {
  const result: StepResult = { ...outcome, duration: 0, timestamp: tx.now.toISOString() };
  tx.setResult(templateId, result);
  tx.setStatus(templateId, outcome.ok ? "completed" : "failed", reason, { result });
  tx.run.open_steps--;
  // A critical template fails the run as a critical step does (outcome.ts); so do its instances,
  // which are critical too.
  if (!outcome.ok && tx.graph.steps.get(templateId)?.critical && tx.run.status === "running") {
    tx.run.status = "failing";
    tx.events.push({ type: "run.failing", data: { status: "failing", reason: `Critical step ${templateId} failed` } });
  }
}

/** The list the template fans out over, read from the recorded output of the step it names. */
async function readList(
  tx: RunTransaction,
  template: EngineStep,
): Promise<{ ok: true; items: unknown[] } | { ok: false; reason: string }> {
  const ref = parseReference(template.forEach!)!;
  const outputs = await recordedOutputs(tx, [ref.stepId]);
  if (!outputs.has(ref.stepId)) return { ok: false, reason: `${template.forEach}: ${ref.stepId} has no output` };
  let value = outputs.get(ref.stepId);
  for (const field of ref.fieldPath) {
    // Own fields only: `$step_1.constructor` must not reach Object.prototype.
    if (value === null || typeof value !== "object" || !Object.hasOwn(value, field)) {
      return { ok: false, reason: `${template.forEach}: the output has no field "${field}"` };
    }
    value = (value as Record<string, unknown>)[field];
  }
  if (!Array.isArray(value)) return { ok: false, reason: `${template.forEach} is not a list` };
  return { ok: true, items: value };
}
