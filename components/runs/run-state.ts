import type { RunView } from "@/server/engine/run-view";
import type { StoredEvent } from "@/server/events/types";

/** A run as the browser shows it: the snapshot with every later event applied, in order. */
export interface LiveRun extends RunView {
  events: StoredEvent[];
}

export function fromSnapshot(snapshot: RunView): LiveRun {
  return { ...snapshot, events: [] };
}

/** Applies one event. Pure; events at or below the run's last sequence are ignored. */
export function applyEvent(run: LiveRun, event: StoredEvent): LiveRun {
  if (event.seq <= run.lastSeq) return run;
  const data = event.data as Record<string, unknown>;
  const next: LiveRun = { ...run, lastSeq: event.seq, events: [...run.events, event] };
  if (event.type.startsWith("run.") && typeof data.status === "string") {
    next.status = data.status as LiveRun["status"];
    if (["completed", "failed", "cancelled"].includes(data.status)) next.finishedAt = event.createdAt;
  }
  if (event.stepId) {
    next.steps = run.steps.map((step) => {
      if (step.stepId !== event.stepId) return step;
      const updated = { ...step };
      if (event.type === "step.progress" && typeof data.progress === "number") updated.progress = data.progress;
      if (event.type.startsWith("step.") && typeof data.status === "string") {
        updated.status = data.status as typeof step.status;
        if (typeof data.attempt === "number") updated.attempt = data.attempt;
        if (typeof data.reason === "string") updated.reason = data.reason;
        if (data.result) updated.result = data.result as typeof step.result;
        if (data.status === "running") updated.startedAt = event.createdAt;
        if (data.status === "completed") updated.progress = 100;
        if (["completed", "failed", "skipped", "blocked", "cancelled"].includes(data.status))
          updated.finishedAt = event.createdAt;
      }
      return updated;
    });
  }
  return next;
}
