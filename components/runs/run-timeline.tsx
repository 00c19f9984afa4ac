"use client";

import { useMemo } from "react";
import type { Step } from "@/server/plan-schema";
import { useNow } from "@/components/ui/use-now";
import { formatDuration, humanStatus } from "./format";
import type { LiveRun } from "./run-state";
import { criticalPath, timelineBars } from "./timeline";

/**
 * A Gantt chart of step start and end times: bars that overlap ran in parallel; the critical path
 * (the chain that decided when the run ended) is highlighted.
 */
export function RunTimeline({ run, steps }: { run: LiveRun; steps: Step[] }) {
  const running = run.steps.some((step) => step.status === "running");
  const now = useNow(1000, running);
  const dependsOn = useMemo(() => new Map(steps.map((step) => [step.id, step.dependsOn])), [steps]);
  const timed = useMemo(
    () => run.steps.map((state) => ({ ...state, dependsOn: dependsOn.get(state.stepId) ?? [] })),
    [run.steps, dependsOn],
  );
  const bars = useMemo(() => timelineBars(timed), [timed]);
  const critical = useMemo(() => new Set(criticalPath(timed)), [timed]);
  const statusById = useMemo(() => new Map(run.steps.map((s) => [s.stepId, s.status])), [run.steps]);

  if (bars.length === 0) return <p className="empty">No step has started yet. Bars appear here as steps run.</p>;
  const origin = Math.min(Date.parse(run.startedAt ?? run.createdAt), bars[0]!.start);
  const latestEnd = Math.max(...bars.map((bar) => bar.end ?? Math.max(now, bar.start)));
  const span = Math.max(1, latestEnd - origin);
  const pathIds = [...critical];

  return (
    <section className="timeline" aria-label="Timeline" data-testid="timeline">
      <p className="muted">
        {formatDuration(span)} from the first start to the last end.{" "}
        {pathIds.length > 0 && (
          <>
            Critical path: <span data-testid="critical-path">{pathIds.join(" → ")}</span>
          </>
        )}
      </p>
      <ol className="gantt">
        {bars.map((bar) => {
          const end = bar.end ?? Math.max(now, bar.start);
          const status = statusById.get(bar.stepId) ?? "running";
          return (
            <li key={bar.stepId} className="gantt-row" data-bar-step={bar.stepId}>
              <span className="gantt-label mono">{bar.stepId}</span>
              <span className="gantt-track">
                <span
                  className={`gantt-bar status-${status}${critical.has(bar.stepId) ? " critical" : ""}`}
                  style={{
                    left: `${((bar.start - origin) / span) * 100}%`,
                    width: `${Math.max(0.3, ((end - bar.start) / span) * 100)}%`,
                  }}
                  title={`${bar.stepId}: ${humanStatus(status)}, ${formatDuration(end - bar.start)}`}
                />
              </span>
              <span className="gantt-duration muted">{formatDuration(end - bar.start)}</span>
            </li>
          );
        })}
      </ol>
    </section>
  );
}
