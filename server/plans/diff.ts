import { z } from "zod";
import type { PlanContent, Step } from "../plan-schema";

/**
 * What changed between two plan versions, for the history view: plan fields, steps added,
 * removed and moved, and every changed step field with its old and new value.
 */
export const fieldChangeSchema = z.object({
  /** Dotted path: `goal`, `description`, `args.path`, `retry.maxAttempts`, … */
  field: z.string(),
  before: z.unknown(),
  after: z.unknown(),
});
export type FieldChange = z.output<typeof fieldChangeSchema>;

export const stepSummarySchema = z.object({
  id: z.string(),
  title: z.string(),
  tool: z.string(),
  /** 1-based position in the version it belongs to. */
  position: z.number(),
});
export type StepSummary = z.output<typeof stepSummarySchema>;

export const planDiffSchema = z.object({
  plan: z.array(fieldChangeSchema),
  added: z.array(stepSummarySchema),
  removed: z.array(stepSummarySchema),
  /** Steps whose place relative to the others changed (not merely shifted by an insert or delete). */
  moved: z.array(z.object({ id: z.string(), title: z.string(), from: z.number(), to: z.number() })),
  changed: z.array(z.object({ id: z.string(), title: z.string(), changes: z.array(fieldChangeSchema) })),
});
export type PlanDiff = z.output<typeof planDiffSchema>;

type Content = Pick<
  PlanContent,
  "goal" | "summary" | "steps" | "successCriteria" | "questions" | "contextNotes" | "estimatedDuration"
>;

const PLAN_FIELDS = ["goal", "summary", "successCriteria", "questions", "contextNotes", "estimatedDuration"] as const;

/** `order` follows the position and is reported as a move; every other step field is compared. */
const IGNORED_STEP_FIELDS = new Set(["id", "order"]);

export function diffPlans(before: Content, after: Content): PlanDiff {
  const plan: FieldChange[] = [];
  for (const field of PLAN_FIELDS) {
    plan.push(
      ...diffValues(field, (before as Record<string, unknown>)[field], (after as Record<string, unknown>)[field]),
    );
  }

  const beforeIndex = new Map(before.steps.map((step, index) => [step.id, index]));
  const afterIndex = new Map(after.steps.map((step, index) => [step.id, index]));
  const summary = (step: Step, index: number): StepSummary => ({
    id: step.id,
    title: titleOf(step),
    tool: step.tool,
    position: index + 1,
  });
  const added = after.steps.flatMap((step, index) => (beforeIndex.has(step.id) ? [] : [summary(step, index)]));
  const removed = before.steps.flatMap((step, index) => (afterIndex.has(step.id) ? [] : [summary(step, index)]));

  // Steps kept in both, in their new order; those outside the longest run that kept its relative
  // order are the ones that moved.
  const kept = after.steps.filter((step) => beforeIndex.has(step.id));
  const stayed = longestIncreasingRun(kept.map((step) => beforeIndex.get(step.id)!));
  const moved = kept
    .filter((_, index) => !stayed.has(index))
    .map((step) => ({
      id: step.id,
      title: titleOf(step),
      from: beforeIndex.get(step.id)! + 1,
      to: afterIndex.get(step.id)! + 1,
    }));

  const changed: PlanDiff["changed"] = [];
  for (const step of kept) {
    const old = before.steps[beforeIndex.get(step.id)!]!;
    const changes: FieldChange[] = [];
    const fields = new Set([...Object.keys(old), ...Object.keys(step)]);
    for (const field of fields) {
      if (IGNORED_STEP_FIELDS.has(field)) continue;
      changes.push(
        ...diffValues(
          field,
          (old as unknown as Record<string, unknown>)[field],
          (step as unknown as Record<string, unknown>)[field],
        ),
      );
    }
    if (changes.length > 0) changed.push({ id: step.id, title: titleOf(step), changes });
  }
  return { plan, added, removed, moved, changed };
}

function titleOf(step: Pick<Step, "title" | "description">): string {
  return step.title || step.description;
}

/**
 * Objects are compared field by field (so `args.path` shows on its own); arrays and scalars as a
 * whole, because an element-wise diff of a list of hints or dependencies reads worse than before/after.
 */
function diffValues(field: string, before: unknown, after: unknown): FieldChange[] {
  if (isPlainObject(before) && isPlainObject(after)) {
    const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
    return [...keys].flatMap((key) => diffValues(`${field}.${key}`, before[key], after[key]));
  }
  if (sameValue(before, after)) return [];
  return [{ field, before, after }];
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** Equal as a person reads them: key order (which jsonb does not keep) and missing-vs-empty do not count. */
export function sameValue(a: unknown, b: unknown): boolean {
  // A missing optional field and an empty one read the same to a person.
  if ((a === undefined || a === null) && (b === undefined || b === null)) return true;
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(canonical);
  if (isPlainObject(value)) {
    return Object.fromEntries(
      Object.keys(value)
        .sort()
        .map((key) => [key, canonical(value[key])]),
    );
  }
  return value;
}

/** Indices (into `values`) of one longest strictly increasing subsequence, in O(n log n). */
export function longestIncreasingRun(values: readonly number[]): Set<number> {
  const tails: number[] = []; // tails[k] = index of the smallest tail of an increasing run of length k+1
  const previous: number[] = new Array(values.length).fill(-1);
  for (let i = 0; i < values.length; i++) {
    let low = 0;
    let high = tails.length;
    while (low < high) {
      const middle = (low + high) >> 1;
      if (values[tails[middle]!]! < values[i]!) low = middle + 1;
      else high = middle;
    }
    if (low > 0) previous[i] = tails[low - 1]!;
    tails[low] = i;
  }
  const run = new Set<number>();
  for (let i = tails.length ? tails[tails.length - 1]! : -1; i >= 0; i = previous[i]!) run.add(i);
  return run;
}
