"use client";

import { useMutation } from "@tanstack/react-query";
import { useId, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * Approve or deny a gated step, with an optional comment. The server decides whether the step can
 * still be decided (it may have expired or been decided in another tab); the result arrives as
 * events like every other change.
 */
export function DecisionForm({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const decide = useMutation(trpc.runs.decide.mutationOptions());
  const [comment, setComment] = useState("");
  const id = useId();
  const submit = (approve: boolean) =>
    decide.mutate({ runId, stepId, approve, ...(comment.trim() && { comment: comment.trim() }) });
  return (
    <div className="stack-sm decision" role="group" aria-label={`Decide ${stepId}`}>
      <label className="field" htmlFor={`${id}-comment`}>
        <span>Comment (optional)</span>
        <input
          id={`${id}-comment`}
          value={comment}
          maxLength={2000}
          onChange={(event) => setComment(event.target.value)}
          placeholder="Why — recorded in the audit log"
        />
      </label>
      <div className="row">
        <button className="primary" onClick={() => submit(true)} disabled={decide.isPending}>
          Approve
        </button>
        <button className="danger" onClick={() => submit(false)} disabled={decide.isPending}>
          Deny
        </button>
      </div>
      <ErrorMessage error={decide.error} />
    </div>
  );
}

/** A failed step can be tried again (a new attempt) or given up so that independent work goes on. */
export function FailedStepActions({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const retry = useMutation(trpc.runs.retryStep.mutationOptions());
  const skip = useMutation(trpc.runs.skipStep.mutationOptions());
  const busy = retry.isPending || skip.isPending;
  return (
    <div className="stack-sm">
      <div className="row">
        <button className="primary" onClick={() => retry.mutate({ runId, stepId })} disabled={busy}>
          Retry step
        </button>
        <button onClick={() => skip.mutate({ runId, stepId })} disabled={busy}>
          Skip step
        </button>
      </div>
      <ErrorMessage error={retry.error ?? skip.error} />
    </div>
  );
}
