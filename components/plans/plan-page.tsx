"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { PlanRuns } from "@/components/runs/plan-runs";
import { groupIssuesByStep } from "./plan-issues";
import { StepCard } from "./step-card";

export function PlanPage({ planId }: { planId: string }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const plan = useQuery(trpc.plans.get.queryOptions({ planId }));
  // Approval starts a run of this exact version; the person then watches it live.
  const approve = useMutation(
    trpc.plans.approve.mutationOptions({
      onSuccess: ({ runId }) => {
        void queryClient.invalidateQueries(trpc.runs.listForPlan.queryFilter({ planId }));
        router.push(`/runs/${runId}`);
      },
    }),
  );

  if (plan.isPending) return <p aria-busy="true">Loading plan…</p>;
  if (plan.error) return <ErrorMessage error={plan.error} />;
  const { plan: current, issues } = plan.data;
  const issuesByStep = groupIssuesByStep(issues);

  return (
    <section className="stack">
      <header className="plan-header">
        <div>
          <h1>{current.goal}</h1>
          {current.summary && <p>{current.summary}</p>}
          <p className="muted">
            <span className="mono">{current.id}</span> · version {current.version} · {current.source} ·{" "}
            {current.steps.length} steps
          </p>
        </div>
        <div className="stack-sm align-end">
          <button
            className="primary"
            onClick={() => approve.mutate({ planId, version: current.version })}
            disabled={issues.length > 0 || approve.isPending}
          >
            {approve.isPending ? "Starting…" : `Approve and run v${current.version}`}
          </button>
          {issues.length > 0 && <p className="error">This plan has {issues.length} problem(s) and cannot run.</p>}
          <ErrorMessage error={approve.error} />
        </div>
      </header>

      {current.successCriteria.length > 0 && (
        <div>
          <h2>Success criteria</h2>
          <ul>
            {current.successCriteria.map((criterion) => (
              <li key={criterion}>{criterion}</li>
            ))}
          </ul>
        </div>
      )}

      <PlanRuns planId={planId} />

      <ol className="steps" aria-label="Steps">
        {current.steps.map((step) => (
          <StepCard key={step.id} step={step} issues={issuesByStep.get(step.id) ?? []} />
        ))}
      </ol>
      {current.steps.length === 0 && <p className="empty">This plan has no steps.</p>}
    </section>
  );
}
