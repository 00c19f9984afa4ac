"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { RunPanel } from "./run-panel";
import { RunStepCard } from "./run-step-card";
import { useLiveRun } from "./use-live-run";

/** The live view of one run: its header and every step's state as events arrive. */
export function RunPage({ runId }: { runId: string }) {
  const trpc = useTRPC();
  const live = useLiveRun(runId);
  const planId = live.run?.planId;
  const plan = useQuery({
    ...trpc.plans.get.queryOptions({ planId: planId ?? "", version: live.run?.planVersion }),
    enabled: !!planId,
    staleTime: Infinity,
  });

  if (live.error) return <ErrorMessage error={live.error} />;
  if (!live.run || plan.isPending) return <p aria-busy="true">Loading run…</p>;
  if (plan.error) return <ErrorMessage error={plan.error} />;
  const { plan: version } = plan.data;
  const states = new Map(live.run.steps.map((step) => [step.stepId, step]));

  return (
    <section className="stack">
      <header>
        <p className="muted">
          <Link href={`/plans/${version.id}`}>← {version.goal}</Link>
        </p>
      </header>
      <RunPanel run={live.run} connection={live.connection} />
      <ol className="steps" aria-label="Steps">
        {version.steps.map((step) => (
          <RunStepCard key={step.id} step={step} state={states.get(step.id)} runId={runId} />
        ))}
      </ol>
    </section>
  );
}
