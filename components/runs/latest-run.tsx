"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/components/trpc";
import { StatusBadge } from "@/components/ui/status-badge";
import { ACTIVE_RUN_STATUSES, isIn } from "@/server/vocabulary";

/**
 * A plan that has run leads with its latest run: what became of it and the way to it. A reviewer
 * coming back to a plan usually wants the run, not another approval; the full history stays in
 * "Runs of this plan" further down. Renders nothing until the plan has a run.
 */
export function LatestRunBanner({ planId, currentVersion }: { planId: string; currentVersion: number }) {
  const trpc = useTRPC();
  const runs = useQuery({ ...trpc.runs.listForPlan.queryOptions({ planId }), staleTime: 0 });
  const all = runs.data ?? [];
  const latest = all[0];
  if (!latest) return null;
  const open = isIn(ACTIVE_RUN_STATUSES, latest.status);
  return (
    <section className="banner latest-run" aria-label="Latest run" data-testid="latest-run">
      <p>
        <strong>{open ? "Running now:" : "Latest run:"}</strong> v{latest.planVersion}{" "}
        <StatusBadge status={latest.status} />{" "}
        <span className="muted">
          {open ? "started" : "ended"} {new Date(latest.finishedAt ?? latest.createdAt).toLocaleString()}
          {latest.approvedBy && ` · approved by ${latest.approvedBy}`}
          {all.length > 1 && ` · ${all.length} runs in all`}
        </span>{" "}
        <Link className="button small primary" href={`/runs/${latest.id}`}>
          {open ? "Watch the run" : "Open the run"}
        </Link>
      </p>
      {latest.planVersion !== currentVersion && (
        <p className="muted">This plan has changed since: the steps below are v{currentVersion}.</p>
      )}
    </section>
  );
}
