"use client";

import { useMutation } from "@tanstack/react-query";
import type { RunStepView } from "@/server/engine/run-view";
import type { Step } from "@/server/plans/schema";
import type { PlanIssue } from "@/server/plans/validate";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { ProgressBar } from "@/components/ui/progress-bar";
import { StatusBadge } from "@/components/ui/status-badge";

export function StepCard({
  step,
  issues,
  state,
  runId,
}: {
  step: Step;
  issues: PlanIssue[];
  state: RunStepView | undefined;
  runId: string | undefined;
}) {
  const trpc = useTRPC();
  const decide = useMutation(trpc.runs.decide.mutationOptions());
  return (
    <li
      className={`card step ${issues.length ? "invalid" : ""}`}
      data-step-id={step.id}
      data-status={state?.status ?? "draft"}
    >
      <div className="row spread">
        <div className="row">
          <span className="step-number">{step.order}</span>
          <strong>{step.title ?? step.description}</strong>
        </div>
        <div className="row">
          {step.approvalRequired && <span className="tag warn">Requires approval</span>}
          {step.skipped && <span className="tag">Skipped by reviewer</span>}
          <span className={`tag risk-${step.risk}`}>{step.risk} risk</span>
          {state && <StatusBadge status={state.status} />}
        </div>
      </div>
      {step.title && <p>{step.description}</p>}
      <dl className="meta">
        <dt>Tool</dt>
        <dd className="mono">{step.tool}</dd>
        <dt>Capability</dt>
        <dd>{step.capabilityLabel}</dd>
        <dt>Depends on</dt>
        <dd className="mono">{step.dependsOn.length ? step.dependsOn.join(", ") : "—"}</dd>
        <dt>Arguments</dt>
        <dd>
          <pre className="mono args">{JSON.stringify(step.args, null, 2)}</pre>
        </dd>
      </dl>
      {issues.map((issue, index) => (
        <p key={index} className="issue" data-testid="step-issue" data-code={issue.code}>
          {issue.message}
        </p>
      ))}
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
          {state.status === "awaiting_approval" && runId && (
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
