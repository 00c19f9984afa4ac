"use client";

import { useQuery } from "@tanstack/react-query";
import { useEffect } from "react";
import type { Step } from "@/server/plan-schema";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { useNow } from "@/components/ui/use-now";
import { ApprovalDetails } from "./approval-details";
import { formatTimeLeft } from "./format";
import type { LiveStep } from "./run-state";
import { AnswerForm, DecisionForm } from "./step-actions";

/**
 * What waits for a person, at the top of the page: each approval with Approve/Deny and each
 * question with its answer box, the time left before it expires, and what the step would do.
 * This is the one place a person decides: a long run's step card may be far down (or not
 * rendered at all in a virtualised list), so its card only points here. The tab title carries
 * the count so another tab shows it too.
 */
export function PendingList({
  runId,
  waiting,
  steps,
  title,
  steerable,
}: {
  runId: string;
  waiting: LiveStep[];
  steps: ReadonlyMap<string, Step>;
  title: string;
  /** False once the run is cancelled or completed: the list then shows nothing to decide. */
  steerable: boolean;
}) {
  const now = useNow(
    1000,
    waiting.some((step) => step.waiting?.expiresAt),
  );
  useEffect(() => {
    const previous = document.title;
    document.title = waiting.length > 0 ? `(${waiting.length}) ${title} · Stepwise` : `${title} · Stepwise`;
    return () => {
      document.title = previous;
    };
  }, [waiting.length, title]);

  if (waiting.length === 0 || !steerable) return null;
  return (
    <section className="card pending" aria-labelledby="pending-heading" data-testid="pending">
      <h2 id="pending-heading">
        Waiting for you <span className="count-pill">{waiting.length}</span>
      </h2>
      <ul className="pending-items">
        {waiting.map((state) => {
          const step = steps.get(state.stepId);
          const expiresAt = state.waiting?.expiresAt;
          const question = state.status === "awaiting_input";
          return (
            <li
              key={state.stepId}
              id={`pending-${state.stepId}`}
              className="stack-sm pending-item"
              data-pending-step={state.stepId}
            >
              <div className="row spread">
                <span>
                  <strong>{question ? "Question" : "Approval"}</strong> ·{" "}
                  <a href={`#step-${state.stepId}`}>{step?.title ?? step?.description ?? state.stepId}</a>
                </span>
                {expiresAt && (
                  <span className="muted" data-testid="time-left" title={new Date(expiresAt).toLocaleString()}>
                    {formatTimeLeft(expiresAt, now || Date.now())}
                    {question ? "" : "; no decision skips the step"}
                  </span>
                )}
              </div>
              {question ? (
                <AnswerForm
                  runId={runId}
                  stepId={state.stepId}
                  question={state.waiting?.question}
                  choices={state.waiting?.choices}
                />
              ) : (
                <PendingApproval runId={runId} state={state} step={step} />
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

/**
 * What approving lets run, computed on the server (arguments resolved, risk and capability judged
 * from the tool and the command) — from the page's snapshot, or asked for when the step started
 * waiting after the page loaded. Approve is offered only once it is shown.
 */
function PendingApproval({ runId, state, step }: { runId: string; state: LiveStep; step: Step | undefined }) {
  const trpc = useTRPC();
  // Asked for even with the snapshot's view: a decision re-reads it (the approver policy's tally).
  const fetched = useQuery({
    ...trpc.runs.approval.queryOptions({ runId, stepId: state.stepId }),
    staleTime: 0,
  });
  const approval = fetched.data?.approval ?? state.approval ?? undefined;
  if (!approval) {
    return (
      <>
        <ErrorMessage error={fetched.error} />
        {!fetched.error && <p aria-busy="true">Loading what {step?.title ?? state.stepId} would run…</p>}
      </>
    );
  }
  return (
    <>
      <ApprovalDetails approval={approval} />
      <DecisionForm runId={runId} stepId={state.stepId} definitionHash={approval.definitionHash} />
    </>
  );
}
