"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useId, useState, type ReactNode } from "react";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { STATE_LABEL } from "./planning-list";
import type { inferRouterOutputs } from "@trpc/server";
import type { AppRouter } from "@/server/trpc/root";

type PlanningStateView = NonNullable<inferRouterOutputs<AppRouter>["planning"]["state"]>;

interface SessionSummary {
  id: string;
  kind: "create" | "regenerate" | "external";
  mode: "quick" | "deep";
  planId: string | null;
  resultVersion: number | null;
  baseVersion: number | null;
  useJudge: boolean;
}

/**
 * What became of a planning session's plan, and seed 002's decisions on it beside Approve (which
 * is on the plan page): Reject with an optional reason (the plan never runs; audited), or Edit —
 * instructions that go back to the planner (regenerate with feedback: a new version) or to the
 * agent (request changes: it revises and re-submits).
 */
export function SessionDecision({ session }: { session: SessionSummary }) {
  const trpc = useTRPC();
  const id = useId();
  const planId = session.planId!;
  const state = useQuery({
    ...trpc.planning.state.queryOptions({ sessionId: session.id }),
    staleTime: 0,
    refetchInterval: 5_000,
  });
  const plan = useQuery(trpc.plans.get.queryOptions({ planId }));
  const [text, setText] = useState("");
  const { review, regenerate } = useDecisionMutations();

  if (state.isPending || plan.isPending) return <p aria-busy="true">Loading the plan&apos;s state…</p>;
  if (state.error || plan.error) return <ErrorMessage error={state.error ?? plan.error} />;
  const view = state.data;
  if (!view) return null;
  const version = plan.data.plan.version;
  const badge = (
    <span className={`badge planning-${view.state}`} data-testid="session-state" data-state={view.state}>
      {STATE_LABEL[view.state]}
    </span>
  );
  const diffLink =
    version > 1 ? <Link href={`/plans/${planId}?history=1`}>See what changed in v{version} (the diff)</Link> : null;

  if (view.state !== "submitted") {
    return <SessionOutcome view={view} planId={planId} badge={badge} diffLink={diffLink} />;
  }

  const external = session.kind === "external";
  const pending = review.isPending || regenerate.isPending;
  return (
    <div className="card stack-sm" role="group" aria-label="Decide on the plan">
      <div className="row">
        {badge}
        <strong>
          {session.kind === "regenerate" || version > 1
            ? `Version ${version} is ready for review.`
            : "The plan is ready for review."}
        </strong>
      </div>
      <p>
        {external
          ? "The agent submitted its plan. Approve it on the plan page, send it back with instructions, or reject it."
          : `It passed every quality gate${session.useJudge ? " and the judge" : ""}. Nothing runs until you approve it on the plan page.`}
      </p>
      <p className="row">
        <Link className="button primary" href={`/plans/${planId}`}>
          Review the plan
        </Link>
        {diffLink}
      </p>
      <label className="field" htmlFor={`${id}-text`}>
        <span>Instructions to revise by, or why you reject it</span>
        <textarea
          id={`${id}-text`}
          rows={3}
          maxLength={4000}
          value={text}
          onChange={(event) => setText(event.target.value)}
          placeholder="Optional for Reject; needed for Edit"
        />
      </label>
      <div className="row">
        <button
          type="button"
          disabled={pending || !text.trim()}
          onClick={() =>
            external
              ? review.mutate({ planId, version, decision: "request_changes", comment: text.trim() })
              : regenerate.mutate({ planId, baseVersion: version, feedback: text.trim(), mode: session.mode })
          }
        >
          {regenerate.isPending
            ? "Sending…"
            : external
              ? "Edit: send back to the agent"
              : "Edit: revise with these instructions"}
        </button>
        <button
          type="button"
          className="danger"
          disabled={pending}
          onClick={() => review.mutate({ planId, version, decision: "reject", comment: text.trim() })}
        >
          Reject the plan
        </button>
      </div>
      <ErrorMessage error={review.error ?? regenerate.error} />
    </div>
  );
}

/** Review and regenerate, each refreshing what shows the plan's state once done. */
function useDecisionMutations() {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const refresh = () => {
    void queryClient.invalidateQueries({ queryKey: trpc.planning.pathKey() });
    void queryClient.invalidateQueries({ queryKey: trpc.inbox.pathKey() });
    void queryClient.invalidateQueries({ queryKey: trpc.plans.pathKey() });
  };
  const review = useMutation(trpc.plans.review.mutationOptions({ onSuccess: refresh }));
  const regenerate = useMutation(
    trpc.planner.regenerate.mutationOptions({ onSuccess: ({ sessionId }) => router.push(`/tasks/${sessionId}`) }),
  );
  return { review, regenerate };
}

/** A plan no longer awaiting a decision here: rejected, approved, or waiting for someone else. */
function SessionOutcome({
  view,
  planId,
  badge,
  diffLink,
}: {
  view: PlanningStateView;
  planId: string;
  badge: ReactNode;
  diffLink: ReactNode;
}) {
  if (view.state === "rejected") {
    return (
      <div className="card stack-sm" role="status">
        <div className="row">
          {badge}
          <strong>This plan was rejected; it will not run.</strong>
        </div>
        <p>
          Nothing more waits for you here. <Link href={`/plans/${planId}`}>The plan</Link> stays under the Archived
          filter of the plans list, where it can be restored.
        </p>
      </div>
    );
  }
  if (view.state === "approved") {
    return (
      <div className="card stack-sm" role="status">
        <div className="row">
          {badge}
          <strong>Approved: a run was started from this plan.</strong>
        </div>
        <p className="row">
          {view.runId && <Link href={`/runs/${view.runId}`}>Open the run</Link>}
          <Link href={`/plans/${planId}`}>The plan</Link>
        </p>
      </div>
    );
  }
  return (
    <div className="card stack-sm" role="status">
      <div className="row">
        {badge}
        <strong>{view.waitsFor ? `Waiting for ${view.waitsFor}.` : `This plan is ${view.state}.`}</strong>
      </div>
      <p className="row">
        <Link href={`/plans/${planId}`}>The plan</Link>
        {diffLink}
      </p>
    </div>
  );
}
