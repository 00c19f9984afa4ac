"use client";

import { useMutation } from "@tanstack/react-query";
import Link from "next/link";
import { useMemo, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { ProgressBar } from "@/components/ui/progress-bar";
import { StatusBadge } from "@/components/ui/status-badge";
import { useNow } from "@/components/ui/use-now";
import { formatDuration, humanStatus } from "./format";
import { isFinished, type LiveRun } from "./run-state";
import { NotificationToggle } from "./wait-notifications";
import { isIn, SETTLED_STEP_STATUSES } from "@/server/vocabulary";

/** Counts are listed in the order a run moves through them. */
const STATUS_ORDER = [
  "awaiting_approval",
  "awaiting_input",
  "awaiting_agent",
  "running",
  "ready",
  "pending",
  "completed",
  "failed",
  "blocked",
  "skipped",
  "cancelled",
];

const CONNECTION_TEXT: Record<string, string> = {
  idle: "connecting…",
  connecting: "reconnecting…",
  pending: "live",
  error: "disconnected — retrying",
  closed: "finished",
  offline: "offline — resumes when the network is back",
};

/** The run at a glance: state, counts per step state, elapsed time, progress, trace and approver; run-wide controls. */
export function RunPanel({ run, goal, connection }: { run: LiveRun; goal: string; connection: string }) {
  const trpc = useTRPC();
  const cancel = useMutation(trpc.runs.cancel.mutationOptions());
  const pause = useMutation(trpc.runs.pause.mutationOptions());
  const resume = useMutation(trpc.runs.resume.mutationOptions());
  const [confirmCancel, setConfirmCancel] = useState(false);
  const finished = isFinished(run.status);
  const now = useNow(1000, !finished);
  // A failed run keeps its stream open (a retry or skip reopens it), but it is not "live" work.
  const shownConnection = run.status === "failed" && connection === "pending" ? "closed" : connection;

  const { counts, settled } = useMemo(() => {
    const byStatus = new Map<string, number>();
    let done = 0;
    for (const step of run.steps) {
      byStatus.set(step.status, (byStatus.get(step.status) ?? 0) + 1);
      if (isIn(SETTLED_STEP_STATUSES, step.status)) done++;
    }
    return {
      counts: STATUS_ORDER.filter((s) => byStatus.has(s)).map((s) => [s, byStatus.get(s)!] as const),
      settled: done,
    };
  }, [run.steps]);

  const started = Date.parse(run.startedAt ?? run.createdAt);
  const elapsed = (run.finishedAt ? Date.parse(run.finishedAt) : Math.max(now, started)) - started;
  const percent = run.steps.length ? (settled / run.steps.length) * 100 : 100;

  return (
    <section className="card run-panel" aria-label="Run" data-run-status={run.status}>
      <div className="row spread">
        <div className="row">
          <h1 className="run-title">{goal}</h1>
          <StatusBadge status={run.status} />
        </div>
        <div className="row">
          <span className={`connection connection-${shownConnection}`} data-testid="connection" role="status">
            {CONNECTION_TEXT[shownConnection] ?? shownConnection}
          </span>
          {!finished && <NotificationToggle />}
          {run.status === "running" && (
            <button onClick={() => pause.mutate({ runId: run.id })} disabled={pause.isPending}>
              Pause
            </button>
          )}
          {run.status === "paused" && (
            <button className="primary" onClick={() => resume.mutate({ runId: run.id })} disabled={resume.isPending}>
              Resume
            </button>
          )}
          {!finished && !confirmCancel && <button onClick={() => setConfirmCancel(true)}>Cancel run…</button>}
          {!finished && confirmCancel && (
            <span className="row confirm" role="group" aria-label="Confirm cancelling the run">
              <span>Running steps are aborted and nothing else starts.</span>
              <button
                className="danger"
                onClick={() => cancel.mutate({ runId: run.id }, { onSettled: () => setConfirmCancel(false) })}
                disabled={cancel.isPending}
              >
                Yes, cancel the run
              </button>
              <button onClick={() => setConfirmCancel(false)}>Keep running</button>
            </span>
          )}
        </div>
      </div>
      <RunFacts run={run} elapsed={elapsed} />
      <ProgressBar value={percent} label={`Run progress: ${settled} of ${run.steps.length} steps settled`} />
      <ul className="status-counts" data-testid="run-counts" aria-label="Steps per state">
        {counts.map(([status, count]) => (
          <li key={status} className={`count status-${status}`} data-status={status} data-count={count}>
            {count} {humanStatus(status)}
          </li>
        ))}
      </ul>
      {run.reason && run.status !== "completed" && <p className="muted">{run.reason}</p>}
      <ErrorMessage error={cancel.error ?? pause.error ?? resume.error} />
    </section>
  );
}

/** Elapsed time, who approved which version, workspace, parallelism, recovery, trace and links. */
function RunFacts({ run, elapsed }: { run: LiveRun; elapsed: number }) {
  return (
    <dl className="run-facts">
      <div>
        <dt>Elapsed</dt>
        <dd data-testid="elapsed">{formatDuration(elapsed)}</dd>
      </div>
      <div>
        <dt>Approved</dt>
        <dd>
          v{run.planVersion} by {run.approvedBy} · {new Date(run.createdAt).toLocaleString()}
          {run.approvalNote && (
            <blockquote className="approval-note" data-testid="approval-note">
              “{run.approvalNote}”
            </blockquote>
          )}
        </dd>
      </div>
      <div>
        <dt>Workspace</dt>
        <dd data-testid="run-workspace">
          {run.workspace.name ?? run.workspace.path} <span className="mono muted">{run.workspace.path}</span>
        </dd>
      </div>
      <div>
        <dt>At once</dt>
        <dd data-testid="max-parallel">up to {run.maxParallel} steps</dd>
      </div>
      <div>
        <dt>Recovery</dt>
        <dd data-testid="recovery-policy">
          {run.recoveryPolicy === "auto"
            ? "automatic: the planner's proposals are applied (at most 2 per step, never an abort)"
            : "a person decides"}
        </dd>
      </div>
      <div>
        <dt>Trace id</dt>
        <dd className="mono" data-testid="trace-id">
          {run.traceId}
        </dd>
      </div>
      <div>
        <dt>Decisions</dt>
        <dd>
          <Link href={`/audit?run=${run.id}`}>Audit log for this run</Link>
        </dd>
      </div>
      {run.parent && (
        <div>
          <dt>Sub-plan of</dt>
          <dd>
            <Link href={`/runs/${run.parent.runId}`}>step {run.parent.stepId} of its parent run</Link>
          </dd>
        </div>
      )}
      {run.rerunOf && (
        <div>
          <dt>Re-run of</dt>
          <dd>
            <Link href={`/runs/${run.rerunOf}`}>an earlier run</Link>
          </dd>
        </div>
      )}
    </dl>
  );
}
