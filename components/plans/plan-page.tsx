"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useEffect, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { RunPanel } from "@/components/runs/run-panel";
import { useLiveRun } from "@/components/runs/use-live-run";
import { groupIssuesByStep } from "./plan-issues";
import { StepCard } from "./step-card";

export function PlanPage({ planId }: { planId: string }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const plan = useQuery(trpc.plans.get.queryOptions({ planId }));
  const runs = useQuery(trpc.runs.listForPlan.queryOptions({ planId }));
  const [selectedRunId, setSelectedRunId] = useState<string | undefined>();
  const runId = selectedRunId ?? runs.data?.[0]?.id;
  const live = useLiveRun(runId);
  const approve = useMutation(
    trpc.plans.approve.mutationOptions({
      onSuccess: async ({ runId: newRunId }) => {
        setSelectedRunId(newRunId);
        await queryClient.invalidateQueries(trpc.runs.listForPlan.queryFilter({ planId }));
      },
    }),
  );

  // The run selector shows run states too; refresh it when the live run changes state.
  const liveStatus = live.run?.status;
  useEffect(() => {
    if (liveStatus) void queryClient.invalidateQueries(trpc.runs.listForPlan.queryFilter({ planId }));
  }, [liveStatus, planId, queryClient, trpc]);

  if (plan.isPending) return <p aria-busy="true">Loading plan…</p>;
  if (plan.error) return <ErrorMessage error={plan.error} />;
  const { plan: current, issues } = plan.data;
  const issuesByStep = groupIssuesByStep(issues);
  const stepStates = new Map(live.run?.steps.map((step) => [step.stepId, step]));

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

      {runs.data && runs.data.length > 0 && (
        <div className="row">
          <label className="field inline">
            <span>Run</span>
            <select value={runId} onChange={(e) => setSelectedRunId(e.target.value)} aria-label="Select run">
              {runs.data.map((run) => (
                <option key={run.id} value={run.id}>
                  {new Date(run.createdAt).toLocaleString()} · v{run.planVersion} · {run.status}
                </option>
              ))}
            </select>
          </label>
        </div>
      )}
      {live.run && <RunPanel run={live.run} connection={live.connection} />}
      <ErrorMessage error={live.error} />

      <ol className="steps" aria-label="Steps">
        {current.steps.map((step) => (
          <StepCard
            key={step.id}
            step={step}
            issues={issuesByStep.get(step.id) ?? []}
            state={stepStates.get(step.id)}
            runId={runId}
          />
        ))}
      </ol>
      {current.steps.length === 0 && <p className="empty">This plan has no steps.</p>}
    </section>
  );
}
