import type { StepStatus } from "../plan-schema";

/** What the scheduler needs to know about a step; derived once per plan version. */
export interface GraphStep {
  id: string;
  dependsOn: readonly string[];
  /** Steps whose output this step's arguments reference. */
  references: ReadonlySet<string>;
  gated: boolean;
  /**
   * Steps this step's `when` reads that are not among its dependencies: it waits until each has
   * settled (completed, failed, skipped, blocked or cancelled), whatever the outcome.
   */
  after?: readonly string[];
}

/** Statuses after which a step changes no more (unless a person retries it). */
const SETTLED = new Set<StepStatus>(["completed", "failed", "skipped", "blocked", "cancelled"]);

export type PendingDecision =
  | { kind: "wait" }
  | { kind: "ready" }
  | { kind: "awaiting_approval" }
  | { kind: "blocked"; reason: string }
  | { kind: "skipped"; reason: string };

/**
 * Decides what a pending step becomes, given the statuses of its dependencies. Pure.
 * - a failed or blocked dependency blocks the step (independent work carries on);
 * - a skipped dependency is satisfied, unless this step needs its output: then it is skipped too;
 * - when every dependency is satisfied the step is ready, or waits for approval when gated.
 */
export function decidePending(step: GraphStep, statusOf: (id: string) => StepStatus | undefined): PendingDecision {
  let waiting = false;
  let skipReason: string | undefined;
  for (const dep of step.dependsOn) {
    const status = statusOf(dep);
    if (status === "failed" || status === "blocked") {
      return { kind: "blocked", reason: `Dependency ${dep} ${status === "failed" ? "failed" : "is blocked"}` };
    }
    if (status === "skipped" || status === "cancelled") {
      if (step.references.has(dep)) skipReason ??= `Dependency ${dep} was ${status} and its output is needed`;
    } else if (status !== "completed") {
      waiting = true;
    }
  }
  if (skipReason) return { kind: "skipped", reason: skipReason };
  if (waiting) return { kind: "wait" };
  if (step.after?.some((id) => !SETTLED.has(statusOf(id)!))) return { kind: "wait" };
  return step.gated ? { kind: "awaiting_approval" } : { kind: "ready" };
}

/**
 * The steps that can start now: every pending step whose decision is "ready", in plan order.
 * The engine applies `decidePending` incrementally; this whole-graph form states the rule in
 * one function for tests and tools.
 */
export function findReadySteps(steps: readonly GraphStep[], statuses: ReadonlyMap<string, StepStatus>): string[] {
  return steps
    .filter((step) => statuses.get(step.id) === "pending")
    .filter((step) => decidePending(step, (id) => statuses.get(id)).kind === "ready")
    .map((step) => step.id);
}

/** How many more steps may be dispatched given the run's limit and what is already in flight. */
export function freeSlots(maxParallel: number, inFlight: number): number {
  return Math.max(0, maxParallel - inFlight);
}

/** Exponential backoff with full jitter, so retries of many steps do not stampede together. */
export function retryDelayMs(attempt: number, baseMs: number, random: () => number = Math.random): number {
  const ceiling = Math.min(baseMs * 2 ** (attempt - 1), 60_000);
  return Math.round(ceiling / 2 + (random() * ceiling) / 2);
}
