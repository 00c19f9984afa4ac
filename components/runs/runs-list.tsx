"use client";

import { useInfiniteQuery } from "@tanstack/react-query";
import { IntentLink } from "@/components/ui/intent-link";
import { useState } from "react";
import { RUN_STATUSES, SETTLED_STEP_STATUSES, type RunStatus } from "@/server/vocabulary";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { StatusBadge } from "@/components/ui/status-badge";
import { formatDuration, humanStatus } from "./format";
import "./runs.css";
import type { inferRouterOutputs } from "@trpc/server";
import type { AppRouter } from "@/server/trpc/root";

type RunRowData = inferRouterOutputs<AppRouter>["runs"]["list"]["runs"][number];

const FILTERS = RUN_STATUSES;

/**
 * Runs newest first — of one plan (its history) or across the app — with state filters. Read when
 * shown (a list is a report, not a live view: open a run to follow it live) and refreshed on request.
 */
export function RunsList({ planId, heading }: { planId?: string; heading: string }) {
  const trpc = useTRPC();
  const [statuses, setStatuses] = useState<RunStatus[]>([]);
  const runs = useInfiniteQuery({
    ...trpc.runs.list.infiniteQueryOptions(
      { ...(planId && { planId }), ...(statuses.length > 0 && { statuses }), limit: 25 },
      { getNextPageParam: (page) => page.nextCursor },
    ),
    staleTime: 0,
  });
  const counts = runs.data?.pages[0]?.statusCounts ?? {};
  const total = Object.values(counts).reduce((sum, n) => sum + (n ?? 0), 0);
  const rows = runs.data?.pages.flatMap((page) => page.runs) ?? [];
  const toggle = (status: RunStatus) =>
    setStatuses((current) => (current.includes(status) ? current.filter((s) => s !== status) : [...current, status]));

  // On a plan's page the list appears only once it has runs, so loading it moves nothing.
  if (planId && (runs.isPending || (runs.data && total === 0))) return null;
  return (
    <section aria-label={heading} className="stack-sm runs-list">
      <div className="row spread">
        <h2>{heading}</h2>
        <button onClick={() => void runs.refetch()} disabled={runs.isFetching}>
          {runs.isFetching ? "Refreshing…" : "Refresh"}
        </button>
      </div>
      <div className="filters" role="group" aria-label="Filter by state">
        <button aria-pressed={statuses.length === 0} onClick={() => setStatuses([])}>
          All ({total})
        </button>
        {FILTERS.map((status) => (
          <button key={status} aria-pressed={statuses.includes(status)} onClick={() => toggle(status)}>
            {humanStatus(status)} ({counts[status] ?? 0})
          </button>
        ))}
      </div>
      <ErrorMessage error={runs.error} />
      {runs.isPending && <p aria-busy="true">Loading runs…</p>}
      {runs.data && rows.length === 0 && (
        <p className="empty">
          {statuses.length > 0
            ? "No run is in the chosen states. Clear the filter to see every run."
            : "No runs yet. Approve a plan to start one."}
        </p>
      )}
      {rows.length > 0 && (
        <table className="table">
          <thead>
            <tr>
              <th scope="col">State</th>
              {!planId && <th scope="col">Plan</th>}
              <th scope="col">Started</th>
              <th scope="col">Version</th>
              <th scope="col">Approved by</th>
              <th scope="col">Steps</th>
              <th scope="col">Duration</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((run) => (
              <RunRow key={run.id} run={run} planId={planId} />
            ))}
          </tbody>
        </table>
      )}
      {runs.hasNextPage && (
        <button onClick={() => void runs.fetchNextPage()} disabled={runs.isFetchingNextPage}>
          {runs.isFetchingNextPage ? "Loading…" : "Show older runs"}
        </button>
      )}
    </section>
  );
}

/** One run: its state, plan, start, version, approver, steps settled (failed, waiting) and duration. */
function RunRow({ run, planId }: { run: RunRowData; planId: string | undefined }) {
  const settled = SETTLED_STEP_STATUSES.reduce((sum, s) => sum + (run.stepCounts[s] ?? 0), 0);
  const waiting = (run.stepCounts.awaiting_approval ?? 0) + (run.stepCounts.awaiting_input ?? 0);
  const started = run.startedAt ?? run.createdAt;
  return (
    <tr data-run-id={run.id} data-status={run.status}>
      <td>
        <StatusBadge status={run.status} />
      </td>
      {!planId && (
        <td>
          <IntentLink href={`/runs/${run.id}`}>{run.goal}</IntentLink>
        </td>
      )}
      <td>
        {planId ? (
          <IntentLink href={`/runs/${run.id}`}>{new Date(started).toLocaleString()}</IntentLink>
        ) : (
          new Date(started).toLocaleString()
        )}
      </td>
      <td>v{run.planVersion}</td>
      <td>{run.approvedBy}</td>
      <td>
        {settled}/{run.totalSteps}
        {(run.stepCounts.failed ?? 0) > 0 && <span className="error"> · {run.stepCounts.failed} failed</span>}
        {waiting > 0 && <span className="warn-text"> · {waiting} waiting</span>}
      </td>
      <td>{run.finishedAt ? formatDuration(Date.parse(run.finishedAt) - Date.parse(started)) : "–"}</td>
    </tr>
  );
}
