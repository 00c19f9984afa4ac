export interface TimedStep {
  stepId: string;
  dependsOn: string[];
  startedAt: string | null;
  finishedAt: string | null;
}

export interface TimelineBar {
  stepId: string;
  start: number;
  /** Null while the step is still running. */
  end: number | null;
}

/** Bars for every step that started, ordered by start time. */
export function timelineBars(steps: TimedStep[]): TimelineBar[] {
  return steps
    .filter((step) => step.startedAt)
    .map((step) => ({
      stepId: step.stepId,
      start: Date.parse(step.startedAt!),
      end: step.finishedAt ? Date.parse(step.finishedAt) : null,
    }))
    .sort((a, b) => a.start - b.start || a.stepId.localeCompare(b.stepId));
}

/**
 * The chain of steps that decided when the run ended: from the step that finished last, go back to
 * the dependency that finished last, and so on. Shortening any other step would not have ended the
 * run sooner. Returned in execution order.
 */
export function criticalPath(steps: TimedStep[]): string[] {
  const byId = new Map(steps.map((step) => [step.stepId, step]));
  const end = (step: TimedStep | undefined) => (step?.finishedAt ? Date.parse(step.finishedAt) : -Infinity);
  let current: TimedStep | undefined;
  for (const step of steps) if (step.startedAt && end(step) > end(current)) current = step;
  const path: string[] = [];
  const seen = new Set<string>();
  while (current && !seen.has(current.stepId)) {
    seen.add(current.stepId);
    path.push(current.stepId);
    let previous: TimedStep | undefined;
    for (const dep of current.dependsOn) {
      const candidate = byId.get(dep);
      if (candidate?.startedAt && end(candidate) > end(previous)) previous = candidate;
    }
    current = previous;
  }
  return path.reverse();
}
