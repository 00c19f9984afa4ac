"use client";

import type { ApprovalView } from "@/server/engine/approval-view";
import { describeValue } from "./format";

/**
 * Exactly what approving lets run, as the server computed it: the tool, the arguments with every
 * `$step` reference resolved to the value that will be used, where it acts, and the risk and
 * capability judged from the tool and the command itself. The plan author's own labels appear
 * only as "author says …", and only when they disagree.
 */
export function ApprovalDetails({ approval }: { approval: ApprovalView }) {
  const { assessment, authorSays } = approval;
  const resolved = describeValue(approval.resolvedArgs).text;
  const written = describeValue(approval.args).text;
  const authorDisagrees =
    authorSays.risk !== assessment.risk || authorSays.capabilityLabel !== assessment.capabilityLabel;
  return (
    <div className="what-runs stack-sm" data-testid="approval-details">
      <p className="row">
        <span className={`tag risk-${assessment.risk}`} data-testid="computed-risk">
          {assessment.risk} risk
        </span>
        <span data-testid="computed-capability">{assessment.capabilityLabel}</span>
        {assessment.reason && (
          <span className="muted" data-testid="risk-reason">
            ({assessment.reason})
          </span>
        )}
      </p>
      <p className="muted">
        Runs <code className="mono">{approval.tool}</code> with
      </p>
      <pre className="mono args" data-testid="approval-args">
        {resolved}
      </pre>
      <p className="muted" data-testid="approval-where">
        In <code className="mono">{approval.workspace}</code> · timeout {approval.timeoutSeconds} s · up to{" "}
        {approval.maxAttempts} attempt{approval.maxAttempts === 1 ? "" : "s"}
      </p>
      {approval.resolveError && (
        <p className="error" data-testid="resolve-error">
          {approval.resolveError}
        </p>
      )}
      {written !== resolved && (
        <details>
          <summary className="muted">As written in the plan (before $step references are resolved)</summary>
          <pre className="mono args">{written}</pre>
        </details>
      )}
      <ApprovalTally approval={approval} />
      {authorDisagrees && (
        <p className="muted" data-testid="author-says">
          The plan’s author says: {authorSays.capabilityLabel}, {authorSays.risk} risk.
        </p>
      )}
    </div>
  );
}

/**
 * The workspace's approver policy at work: "1 of 2 approvals — waiting for another approver", who
 * approved so far, and the author who may not. Nothing under the default (one approval by anyone).
 */
function ApprovalTally({ approval }: { approval: ApprovalView }) {
  const tally = approval.approvals;
  if (!tally || (tally.required === 1 && tally.given.length === 0 && !tally.author)) return null;
  return (
    <p data-testid="approval-tally">
      <strong>
        {tally.given.length} of {tally.required} approval{tally.required === 1 ? "" : "s"}
      </strong>
      {tally.given.length > 0 && tally.given.length < tally.required && " — waiting for another approver"}
      <span className="muted">
        {" "}
        ({tally.policy}
        {tally.given.length > 0 && `; approved by ${tally.given.join(", ")}`}
        {tally.author && `; ${tally.author} wrote the plan and may not approve`})
      </span>
    </p>
  );
}
