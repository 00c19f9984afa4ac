"use client";

import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useId, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

export interface PlanLifecycleView {
  state: "active" | "rejected" | "archived";
  rejectedVersion: number | null;
  archivedAt: string | null;
  runs: number;
}

/** Why Approve is not offered on a rejected or archived plan, and the way back: Restore. */
export function PlanSetAsideBanner({ planId, lifecycle }: { planId: string; lifecycle: PlanLifecycleView }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const restore = useMutation(
    trpc.plans.restore.mutationOptions({
      onSuccess: () => void queryClient.invalidateQueries({ queryKey: trpc.plans.pathKey() }),
    }),
  );
  if (lifecycle.state === "active") return null;
  return (
    <div className="banner invalid" role="status" data-testid="plan-set-aside" data-state={lifecycle.state}>
      <p>
        {lifecycle.state === "rejected"
          ? `This plan was rejected (version ${lifecycle.rejectedVersion}); it cannot be approved.`
          : "This plan is archived; it cannot be approved."}{" "}
        Restore it to bring it back to the plans list and approve it after all.
      </p>
      <button type="button" onClick={() => restore.mutate({ planId })} disabled={restore.isPending}>
        Restore
      </button>
      <ErrorMessage error={restore.error} />
    </div>
  );
}

/**
 * Reject (seed 002: a plan that never ran; optional reason, audited) and Archive (discard; refused
 * while a run is active). An agent's plan is rejected through its review form instead, which also
 * tells the agent.
 */
export function PlanLifecycleActions({
  planId,
  version,
  lifecycle,
  agentPlan,
}: {
  planId: string;
  version: number;
  lifecycle: PlanLifecycleView;
  agentPlan: boolean;
}) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const id = useId();
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: trpc.plans.pathKey() });
    void queryClient.invalidateQueries({ queryKey: trpc.inbox.pathKey() });
  };
  const review = useMutation(trpc.plans.review.mutationOptions({ onSuccess: refresh }));
  const archive = useMutation(trpc.plans.archive.mutationOptions({ onSuccess: refresh }));
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  if (lifecycle.state !== "active") return null;
  const canReject = !agentPlan && lifecycle.runs === 0;
  return (
    <div className="stack-sm align-end">
      <div className="row">
        {canReject && (
          <button type="button" className="danger" aria-expanded={rejecting} onClick={() => setRejecting((v) => !v)}>
            Reject…
          </button>
        )}
        <button type="button" onClick={() => archive.mutate({ planId })} disabled={archive.isPending}>
          {archive.isPending ? "Archiving…" : "Archive"}
        </button>
      </div>
      {rejecting && (
        <div className="stack-sm" role="group" aria-label="Reject the plan">
          <label className="field" htmlFor={`${id}-reason`}>
            <span>Reason (optional)</span>
            <textarea
              id={`${id}-reason`}
              rows={2}
              maxLength={4000}
              value={reason}
              onChange={(event) => setReason(event.target.value)}
            />
          </label>
          <button
            type="button"
            className="danger"
            disabled={review.isPending}
            onClick={() => review.mutate({ planId, version, decision: "reject", comment: reason.trim() })}
          >
            Reject v{version}
          </button>
        </div>
      )}
      <ErrorMessage error={review.error ?? archive.error} />
    </div>
  );
}
