"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useRouter } from "next/navigation";
import { createContext, useContext, useEffect, useId, useMemo, useState, type FormEvent, type ReactNode } from "react";
import type { CommentIntent, CommentView } from "@/server/plans/comments";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";

const INTENTS: { intent: CommentIntent; label: string }[] = [
  { intent: "comment", label: "Comment" },
  { intent: "change", label: "Change this" },
  { intent: "delete", label: "Delete this step" },
  { intent: "insert_before", label: "Insert a step before" },
  { intent: "insert_after", label: "Insert a step after" },
];
const INTENT_LABEL = Object.fromEntries(INTENTS.map(({ intent, label }) => [intent, label])) as Record<
  CommentIntent,
  string
>;

/** The plan's threads, shared by every card through one query (no request per step). */
function usePlanComments(planId: string) {
  const trpc = useTRPC();
  return useQuery({ ...trpc.plans.comments.queryOptions({ planId }), staleTime: 5_000 });
}

/**
 * Starts loading the threads with the plan, not after it: the cards that show them mount only once
 * the plan has arrived, which made the comments a second round trip in a row. A prefetch, not a
 * subscription, so the page itself does not re-render when they arrive.
 */
export function usePrefetchPlanComments(planId: string) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  useEffect(() => {
    void queryClient.prefetchQuery({ ...trpc.plans.comments.queryOptions({ planId }), staleTime: 5_000 });
  }, [queryClient, trpc, planId]);
}

function useCommentMutations(planId: string) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const refresh = () => queryClient.invalidateQueries(trpc.plans.comments.queryFilter({ planId }));
  return {
    add: useMutation(trpc.plans.comment.mutationOptions({ onSuccess: refresh })),
    resolve: useMutation(trpc.plans.resolveComment.mutationOptions({ onSuccess: refresh })),
  };
}

const isOpen = (comment: CommentView) => !comment.resolved;

const NO_THREADS: CommentView[] = [];
const StepThreadsContext = createContext<Map<string, CommentView[]>>(new Map());

/**
 * The plan's threads grouped by step once per answer, for every card of a long plan to read
 * without a query subscription and a filter of its own; a new answer renders only the cards'
 * comment toggles, not the cards.
 */
export function StepThreadsProvider({ planId, children }: { planId: string; children: ReactNode }) {
  const comments = usePlanComments(planId);
  const byStep = useMemo(() => {
    const grouped = new Map<string, CommentView[]>();
    for (const comment of comments.data?.comments ?? []) {
      if (comment.stepId === null) continue;
      const threads = grouped.get(comment.stepId);
      if (threads) threads.push(comment);
      else grouped.set(comment.stepId, [comment]);
    }
    return grouped;
  }, [comments.data]);
  return <StepThreadsContext value={byStep}>{children}</StepThreadsContext>;
}

/**
 * A step's review conversation, inside its card: a toggle with the count of open threads, the
 * threads (intent, field, replies, answered-in-version), and a form to add one. Everything is a
 * native control, so it works from the keyboard alone.
 */
export function StepComments({
  planId,
  version,
  stepId,
  argNames,
}: {
  planId: string;
  version: number;
  stepId: string;
  argNames: string[];
}) {
  const threads = useContext(StepThreadsContext).get(stepId) ?? NO_THREADS;
  const [shown, setShown] = useState(false);
  const open = threads.filter(isOpen).length;
  const regionId = useId();
  return (
    <div className="step-comments" data-testid="step-comments">
      <button
        type="button"
        className="quiet"
        aria-expanded={shown}
        aria-controls={regionId}
        onClick={() => setShown((value) => !value)}
      >
        {threads.length === 0
          ? "Comment"
          : `Comments (${open} open${threads.length > open ? `, ${threads.length - open} resolved` : ""})`}
        <span className="visually-hidden"> on {stepId}</span>
      </button>
      {shown && (
        <section id={regionId} aria-label={`Comments on ${stepId}`} className="stack-sm comment-region">
          <Threads planId={planId} version={version} threads={threads} />
          <CommentForm planId={planId} version={version} stepId={stepId} argNames={argNames} />
        </section>
      )}
    </div>
  );
}

/**
 * The whole plan's conversation, above the steps: comments on the plan itself, how many threads
 * wait for an answer, and "Revise from comments", which sends those to the planner (or back to the
 * agent that wrote the plan) and opens what follows.
 */
export function PlanComments({ planId, version, agentPlan }: { planId: string; version: number; agentPlan: boolean }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const comments = usePlanComments(planId);
  const all = comments.data?.comments ?? [];
  const waiting = all.filter((comment) => isOpen(comment) && comment.answeredInVersion === null).length;
  const planThreads = all.filter((comment) => comment.stepId === null);
  const revise = useMutation(
    trpc.plans.reviseFromComments.mutationOptions({
      onSuccess: (result) => {
        void queryClient.invalidateQueries(trpc.plans.comments.queryFilter({ planId }));
        if (result.sessionId) router.push(`/tasks/${result.sessionId}`);
      },
    }),
  );
  return (
    <section className="card stack-sm plan-comments" aria-label="Review comments">
      <div className="row spread">
        <h2>Review comments</h2>
        <div className="row">
          <span className="muted" data-testid="comments-waiting">
            {waiting === 0
              ? all.length === 0
                ? "No comments yet: comment on a step, or on the plan here."
                : "Every open comment has an answer."
              : `${waiting} comment${waiting === 1 ? "" : "s"} waiting for an answer`}
          </span>
          <button
            type="button"
            onClick={() => revise.mutate({ planId, version })}
            disabled={waiting === 0 || revise.isPending}
            title={
              agentPlan ? "Send the comments back to the agent that wrote the plan" : "Ask the planner for a revision"
            }
          >
            {revise.isPending ? "Sending…" : `Revise from comments${agentPlan ? " (to the agent)" : ""}`}
          </button>
        </div>
      </div>
      {revise.data?.sentTo === "agent" && (
        <p role="status">Sent {revise.data.comments} comment(s) back to the agent; its revision will appear here.</p>
      )}
      <ErrorMessage error={revise.error} />
      <Threads planId={planId} version={version} threads={planThreads} />
      <CommentForm planId={planId} version={version} stepId={null} argNames={[]} />
    </section>
  );
}

function Threads({ planId, version, threads }: { planId: string; version: number; threads: CommentView[] }) {
  const { resolve } = useCommentMutations(planId);
  if (threads.length === 0) return null;
  return (
    <ul className="comment-threads" aria-label="Threads">
      {threads.map((thread, index) => (
        <li
          key={thread.id}
          className={`comment ${thread.resolved ? "resolved" : ""}`}
          data-comment-id={thread.id}
          data-intent={thread.intent}
        >
          <p>
            <strong>{thread.author}</strong>
            {thread.authorKind === "agent" && <span className="tag">agent</span>}{" "}
            <span className="tag">{INTENT_LABEL[thread.intent]}</span>
            {thread.field && <span className="mono"> {thread.field}</span>}{" "}
            <span className="muted">on v{thread.planVersion}</span>
            {thread.answeredInVersion !== null && (
              <span className="tag ok" data-testid="answered">
                answered in v{thread.answeredInVersion}
              </span>
            )}
            {thread.resolved && <span className="tag">resolved by {thread.resolved.by}</span>}
          </p>
          <p className="pre-line">{thread.body}</p>
          {thread.replies.length > 0 && (
            <ul className="comment-replies" aria-label="Replies">
              {thread.replies.map((reply) => (
                <li key={reply.id}>
                  <strong>{reply.author}</strong>
                  {reply.authorKind === "agent" && <span className="tag">agent</span>}:{" "}
                  <span className="pre-line">{reply.body}</span>
                </li>
              ))}
            </ul>
          )}
          <div className="row">
            <ReplyForm
              planId={planId}
              version={version}
              parentId={thread.id}
              label={`Reply to comment ${index + 1} on ${thread.stepId ?? "the plan"}`}
            />
            <button
              type="button"
              className="small"
              onClick={() => resolve.mutate({ planId, commentId: thread.id, resolved: !thread.resolved })}
              disabled={resolve.isPending}
            >
              {thread.resolved ? "Reopen" : "Resolve"}
            </button>
          </div>
        </li>
      ))}
      <ErrorMessage error={resolve.error} />
    </ul>
  );
}

/** `label` names this thread's form: forms are landmarks, and a page of threads must tell them apart. */
function ReplyForm({
  planId,
  version,
  parentId,
  label,
}: {
  planId: string;
  version: number;
  parentId: string;
  label: string;
}) {
  const { add } = useCommentMutations(planId);
  const [body, setBody] = useState("");
  const id = useId();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate({ planId, version, parentId, body }, { onSuccess: () => setBody("") });
  };
  return (
    <form className="row" onSubmit={submit} aria-label={label}>
      <label htmlFor={id} className="visually-hidden">
        {label}
      </label>
      <input id={id} value={body} onChange={(event) => setBody(event.target.value)} placeholder="Reply…" />
      <button type="submit" className="small" disabled={!body.trim() || add.isPending}>
        Reply
      </button>
      <ErrorMessage error={add.error} />
    </form>
  );
}

function CommentForm({
  planId,
  version,
  stepId,
  argNames,
}: {
  planId: string;
  version: number;
  stepId: string | null;
  argNames: string[];
}) {
  const { add } = useCommentMutations(planId);
  const [intent, setIntent] = useState<CommentIntent>("comment");
  const [field, setField] = useState("");
  const [body, setBody] = useState("");
  const id = useId();
  const submit = (event: FormEvent) => {
    event.preventDefault();
    add.mutate(
      { planId, version, ...(stepId && { stepId }), ...(field && { field }), intent, body },
      {
        onSuccess: () => {
          setBody("");
          setIntent("comment");
          setField("");
        },
      },
    );
  };
  const target = stepId ?? "the plan";
  return (
    <form className="stack-sm comment-form" onSubmit={submit} aria-label={`New comment on ${target}`}>
      <div className="row align-end">
        {stepId && (
          <label className="field" htmlFor={`${id}-intent`}>
            <span>What should happen</span>
            <select
              id={`${id}-intent`}
              value={intent}
              onChange={(event) => setIntent(event.target.value as CommentIntent)}
            >
              {INTENTS.map((option) => (
                <option key={option.intent} value={option.intent}>
                  {option.label}
                </option>
              ))}
            </select>
          </label>
        )}
        {argNames.length > 0 && (
          <label className="field" htmlFor={`${id}-field`}>
            <span>About</span>
            <select id={`${id}-field`} value={field} onChange={(event) => setField(event.target.value)}>
              <option value="">the whole step</option>
              {argNames.map((name) => (
                <option key={name} value={`args.${name}`}>
                  argument {name}
                </option>
              ))}
            </select>
          </label>
        )}
      </div>
      <label className="field" htmlFor={`${id}-body`}>
        <span>Comment on {target}</span>
        <textarea id={`${id}-body`} rows={2} value={body} onChange={(event) => setBody(event.target.value)} />
      </label>
      <div className="row">
        <button type="submit" disabled={!body.trim() || add.isPending}>
          {add.isPending ? "Adding…" : "Add comment"}
        </button>
        <ErrorMessage error={add.error} />
      </div>
    </form>
  );
}
