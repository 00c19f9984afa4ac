"use client";

import { useMutation, useQuery } from "@tanstack/react-query";
import { useId, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

/**
 * Seed 002's other review answers, beside Approve: send the plan back with instructions (the agent
 * revises it into a new version) or reject it (its planning session ends). Both are audited and
 * reach the agent through plan_review_status. Shown for plans an agent submitted.
 */
export function ReviewForm({ planId, version }: { planId: string; version: number }) {
  const trpc = useTRPC();
  const status = useQuery(trpc.plans.reviewStatus.queryOptions({ planId, version }));
  const review = useMutation(trpc.plans.review.mutationOptions({ onSuccess: () => void status.refetch() }));
  const [comment, setComment] = useState("");
  const id = useId();
  const state = status.data?.state;
  if (state === "rejected" || state === "changes_requested") {
    return (
      <p className="muted" data-testid="review-state">
        {state === "rejected" ? "Rejected" : "Sent back for changes"} by {status.data!.reviewedBy}
        {status.data!.comment && `: “${status.data!.comment}”`}
        {state === "changes_requested" && " — the agent's revision will appear as a new version."}
      </p>
    );
  }
  if (state !== "awaiting_review") return null;
  return (
    <div className="stack-sm review-form" role="group" aria-label="Review the agent's plan">
      <label className="field" htmlFor={`${id}-comment`}>
        <span>Instructions for the agent</span>
        <textarea
          id={`${id}-comment`}
          rows={2}
          value={comment}
          maxLength={4000}
          onChange={(event) => setComment(event.target.value)}
          placeholder="What should change (needed to send it back)"
        />
      </label>
      <div className="row">
        <button
          type="button"
          onClick={() => review.mutate({ planId, version, decision: "request_changes", comment: comment.trim() })}
          disabled={review.isPending || !comment.trim()}
        >
          Send back for changes
        </button>
        <button
          type="button"
          className="danger"
          onClick={() => review.mutate({ planId, version, decision: "reject", comment: comment.trim() })}
          disabled={review.isPending}
        >
          Reject
        </button>
      </div>
      <ErrorMessage error={review.error} />
    </div>
  );
}
