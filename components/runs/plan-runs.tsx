"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/components/trpc";
import { StatusBadge } from "@/components/ui/status-badge";

/** The runs of one plan, newest first, each linking to its live view. */
export function PlanRuns({ planId }: { planId: string }) {
  const trpc = useTRPC();
  // Fresh on every visit: run states move on while the person is on another page.
  const runs = useQuery({ ...trpc.runs.listForPlan.queryOptions({ planId }), staleTime: 0 });
  if (!runs.data || runs.data.length === 0) return null;
  return (
    <section aria-label="Runs of this plan">
      <h2>Runs</h2>
      <ul className="run-list">
        {runs.data.map((run) => (
          <li key={run.id} className="row">
            <StatusBadge status={run.status} />
            <Link href={`/runs/${run.id}`}>
              {new Date(run.createdAt).toLocaleString()} · v{run.planVersion} · approved by {run.approvedBy}
            </Link>
          </li>
        ))}
      </ul>
    </section>
  );
}
