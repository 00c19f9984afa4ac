"use client";

import type { Step } from "@/server/plans/schema";
import type { PlanIssue } from "@/server/plans/validate";

/** One step under review: everything the reviewer needs to judge it, and its problems. */
export function StepCard({ step, issues }: { step: Step; issues: PlanIssue[] }) {
  return (
    <li className={`card step ${issues.length ? "invalid" : ""}`} data-step-id={step.id}>
      <div className="row spread">
        <div className="row">
          <span className="step-number">{step.order}</span>
          <strong>{step.title ?? step.description}</strong>
        </div>
        <div className="row">
          {step.approvalRequired && <span className="tag warn">Requires approval</span>}
          {step.skipped && <span className="tag">Skipped by reviewer</span>}
          <span className={`tag risk-${step.risk}`}>{step.risk} risk</span>
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
    </li>
  );
}
