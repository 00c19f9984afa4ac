import type { StoredEvent } from "../server/events/types";

export const round = (n: number) => Math.round(n * 10) / 10;

/** Median, min and max of several timed runs. */
export function stats(values: number[]) {
  const sorted = [...values].sort((a, b) => a - b);
  const median = sorted[Math.floor((sorted.length - 1) / 2)]!;
  return { median_ms: round(median), min_ms: round(sorted[0]!), max_ms: round(sorted.at(-1)!), runs: values.length };
}

export function percentile(values: number[], p: number) {
  const sorted = [...values].sort((a, b) => a - b);
  return round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!);
}

/** No step may start before all of its dependencies finished: checked on the event order. */
export function checkOrder(events: StoredEvent[], steps: { id: string; dependsOn?: string[] }[]): boolean {
  const started = new Map<string, number>();
  const completed = new Map<string, number>();
  for (const event of events) {
    if (event.type === "step.running" && event.stepId) started.set(event.stepId, event.seq);
    if (event.type === "step.completed" && event.stepId) completed.set(event.stepId, event.seq);
  }
  return steps.every(
    (step) =>
      completed.has(step.id) &&
      (step.dependsOn ?? []).every((dep) => (completed.get(dep) ?? Infinity) < (started.get(step.id) ?? -Infinity)),
  );
}
