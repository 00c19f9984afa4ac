"use client";

import { useEffect } from "react";
import type { Step } from "@/server/plans/schema";
import { useNow } from "@/components/ui/use-now";
import { describeValue, formatTimeLeft } from "./format";
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
                <>
                  {step && <WhatRuns step={step} />}
                  <DecisionForm runId={runId} stepId={state.stepId} />
                </>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}

/** The tool and its arguments, so a person approves what will actually run. */
function WhatRuns({ step }: { step: Step }) {
  const hasArgs = Object.keys(step.args).length > 0;
  return (
    <div className="what-runs">
      <p className="muted">
        Runs <code className="mono">{step.tool}</code>
        {hasArgs ? " with" : " without arguments"}
      </p>
      {hasArgs && <pre className="mono args">{describeValue(step.args).text}</pre>}
    </div>
  );
}
