"use client";

import { useMutation } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { ProgressBar } from "@/components/ui/progress-bar";
import { StatusBadge } from "@/components/ui/status-badge";
import type { LiveRun } from "./run-state";

const SETTLED = new Set(["completed", "failed", "skipped", "blocked", "cancelled"]);

export function RunPanel({ run, connection }: { run: LiveRun; connection: string }) {
  const trpc = useTRPC();
  const cancel = useMutation(trpc.runs.cancel.mutationOptions());
  const counts = new Map<string, number>();
  for (const step of run.steps) counts.set(step.status, (counts.get(step.status) ?? 0) + 1);
  const settled = run.steps.filter((step) => SETTLED.has(step.status)).length;
  const finished = ["completed", "failed", "cancelled"].includes(run.status);
  return (
    <section className="card run-panel" aria-label="Run" data-run-status={run.status}>
      <div className="row spread">
        <div className="row">
          <h2>Run</h2>
          <StatusBadge status={run.status} />
          <span className="muted">
            v{run.planVersion} approved by {run.approvedBy} · trace{" "}
            <span className="mono">{run.traceId.slice(0, 8)}</span>
          </span>
        </div>
        <div className="row">
          {!finished && (
            <span className="muted" data-testid="connection">
              {connection === "pending" ? "live" : connection}
            </span>
          )}
          {!finished && (
            <button onClick={() => cancel.mutate({ runId: run.id })} disabled={cancel.isPending}>
              Cancel run
            </button>
          )}
        </div>
      </div>
      <ProgressBar value={run.steps.length ? (settled / run.steps.length) * 100 : 100} label="Run progress" />
      <p className="muted" data-testid="run-counts">
        {[...counts].map(([status, count]) => `${count} ${status.replaceAll("_", " ")}`).join(" · ")}
      </p>
      <ErrorMessage error={cancel.error} />
    </section>
  );
}
