"use client";

import { useEffect } from "react";
import type { Step } from "@/server/plans/schema";
import { useNow } from "@/components/ui/use-now";
import { formatTimeLeft } from "./format";
import type { LiveStep } from "./run-state";

/**
 * What waits for a person, at the top of the page: approvals and questions, with the time left
 * before each expires. The tab title carries the count so another tab shows it too.
 */
export function PendingList({
  waiting,
  steps,
  title,
}: {
  waiting: LiveStep[];
  steps: ReadonlyMap<string, Step>;
  title: string;
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

  if (waiting.length === 0) return null;
  return (
    <section className="card pending" aria-labelledby="pending-heading" data-testid="pending">
      <h2 id="pending-heading">
        Waiting for you <span className="count-pill">{waiting.length}</span>
      </h2>
      <ul>
        {waiting.map((state) => {
          const step = steps.get(state.stepId);
          const expiresAt = state.waiting?.expiresAt;
          const kind = state.status === "awaiting_input" ? "Question" : "Approval";
          return (
            <li key={state.stepId} className="row spread" data-pending-step={state.stepId}>
              <span>
                <strong>{kind}</strong> ·{" "}
                <a href={`#step-${state.stepId}`}>{step?.title ?? step?.description ?? state.stepId}</a>
                {state.waiting?.question && <span className="muted"> — {state.waiting.question}</span>}
              </span>
              {expiresAt && (
                <span className="muted" data-testid="time-left" title={new Date(expiresAt).toLocaleString()}>
                  {formatTimeLeft(expiresAt, now || Date.now())}
                </span>
              )}
            </li>
          );
        })}
      </ul>
    </section>
  );
}
