"use client";

import { useMutation } from "@tanstack/react-query";
import type { RunStepView } from "@/server/engine/run-view";
import type { Step } from "@/server/plans/schema";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { ProgressBar } from "@/components/ui/progress-bar";
import { StatusBadge } from "@/components/ui/status-badge";

/** One step of a run: what it does, its live state, result or error, and the actions it waits for. */
export function RunStepCard({ step, state, runId }: { step: Step; state: RunStepView | undefined; runId: string }) {
  const trpc = useTRPC();
  const decide = useMutation(trpc.runs.decide.mutationOptions());
  return (
    <li className="card step" data-step-id={step.id} data-status={state?.status ?? "pending"}>
      <div className="row spread">
        <div className="row">
          <span className="step-number">{step.order}</span>
          <strong>{step.title ?? step.description}</strong>
        </div>
        <div className="row">
          {step.approvalRequired && <span className="tag warn">Requires approval</span>}
          <span className="mono muted">{step.tool}</span>
          {state && <StatusBadge status={state.status} />}
        </div>
      </div>
      {state && (
        <div className="step-run">
          {state.status === "running" && <ProgressBar value={state.progress} label={`${step.id} progress`} />}
          {state.attempt > 1 && <span className="muted">attempt {state.attempt}</span>}
          {state.reason && <p className="muted">{state.reason}</p>}
          {state.result && !state.result.ok && <p className="error">{state.result.error}</p>}
          {state.result?.ok && (
            <details>
              <summary>Result ({state.result.duration} ms)</summary>
              <pre className="mono args">{JSON.stringify(state.result.value, null, 2)}</pre>
            </details>
          )}
          {state.status === "awaiting_approval" && (
            <div className="row">
              <button
                className="primary"
                onClick={() => decide.mutate({ runId, stepId: step.id, approve: true })}
                disabled={decide.isPending}
              >
                Approve
              </button>
              <button
                onClick={() => decide.mutate({ runId, stepId: step.id, approve: false })}
                disabled={decide.isPending}
              >
                Deny
              </button>
              <ErrorMessage error={decide.error} />
            </div>
          )}
        </div>
      )}
    </li>
  );
}
