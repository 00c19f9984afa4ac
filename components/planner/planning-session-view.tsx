"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useSubscription } from "@trpc/tanstack-react-query";
import Link from "next/link";
import { useRouter } from "next/navigation";
import { useId, useState, type FormEvent } from "react";
import { useTRPC } from "@/components/trpc";
import { SessionDecision } from "@/components/planning/session-decision";
import { formatTimeLeft } from "@/components/runs/format";
import { ErrorMessage } from "@/components/ui/error-message";
import { useNow } from "@/components/ui/use-now";
import { StatusBadge } from "@/components/ui/status-badge";
import { PlanCommandBox } from "./plan-command-box";
import { describePlanningEvent, formatCost, formatTokens, type ProgressLine } from "./planner-format";
import { UsageSummary } from "./usage-summary";

/** Events after which the session's stored state (status, questions, result) has changed. */
const REFRESHING = new Set([
  "planning.question",
  "planning.answered",
  "planning.message",
  "planning.completed",
  "planning.invalid",
  "planning.failed",
  "planning.cancelled",
  "planning.timed_out",
  "planning.resumed",
  "planning.usage",
]);

/** A planning session live: progress as it happens, questions to answer, cancel, and the outcome. */
export function PlanningSessionView({ sessionId }: { sessionId: string }) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const sessionKey = trpc.planner.session.queryKey({ sessionId });
  const session = useQuery(trpc.planner.session.queryOptions({ sessionId }));
  const [lines, setLines] = useState<ProgressLine[]>([]);
  const subscription = useSubscription(
    trpc.planner.events.subscriptionOptions(
      { sessionId, lastEventId: null },
      {
        enabled: !!session.data,
        onData: (tracked) => {
          const line = describePlanningEvent(tracked.data);
          if (line)
            setLines((current) => (current.some((known) => known.seq === line.seq) ? current : [...current, line]));
          if (REFRESHING.has(tracked.data.type)) void queryClient.invalidateQueries({ queryKey: sessionKey });
          if (tracked.data.type === "planning.usage") {
            void queryClient.invalidateQueries({ queryKey: trpc.planner.usage.pathKey() });
          }
          // A new plan or version exists now: cached plan pages must not show the old one.
          if (tracked.data.type === "planning.completed") {
            void queryClient.invalidateQueries({ queryKey: trpc.plans.pathKey() });
          }
        },
      },
    ),
  );
  const cancel = useMutation(
    trpc.planner.cancel.mutationOptions({ onSettled: () => queryClient.invalidateQueries({ queryKey: sessionKey }) }),
  );
  const retry = useMutation(
    trpc.planner.retry.mutationOptions({ onSuccess: ({ sessionId: next }) => router.push(`/tasks/${next}`) }),
  );

  if (session.isPending) return <p aria-busy="true">Loading the planning session…</p>;
  if (session.error) return <ErrorMessage error={session.error} />;
  const data = session.data;
  const open = data.status === "running" || data.status === "awaiting_answer";
  const question = data.questions.find((candidate) => candidate.answer === null);

  return (
    <div className="stack" data-session-status={data.status} data-testid="planning-session">
      <div className="row spread">
        <div className="stack-sm">
          {data.kind === "external" ? (
            <h1>An agent asks to plan first</h1>
          ) : (
            <h1>
              {data.kind === "regenerate" ? "Regenerating" : "Planning"}: {data.goal}
            </h1>
          )}
          {data.kind === "external" && (
            <p data-testid="plan-mode-reason">I&apos;d like to plan this out before proceeding. Reason: {data.goal}</p>
          )}
          <p className="muted">
            {data.mode} mode · {data.model}
            {data.useJudge ? " · judged" : ""} · trace <span className="mono">{data.traceId}</span> ·{" "}
            {formatTokens(data.usage.inputTokens + data.usage.outputTokens)} tokens, {formatCost(data.usage.costUsd)}
          </p>
          {data.feedback && <p>Feedback: {data.feedback}</p>}
        </div>
        <div className="row">
          <StatusBadge status={data.status} />
          {open && (
            <button
              type="button"
              className="danger"
              onClick={() => cancel.mutate({ sessionId })}
              disabled={cancel.isPending}
            >
              Cancel planning
            </button>
          )}
        </div>
      </div>
      <ErrorMessage error={cancel.error} />

      {data.deadline && <Deadline deadline={data.deadline} />}
      {data.execution && (
        <p data-testid="planning-execution">
          {["completed", "cancelled", "failed"].includes(data.execution.status)
            ? `Planning is done: the approved plan's run is ${data.execution.status}.`
            : `Executing the approved plan: ${data.execution.settled} of ${data.execution.total} steps settled.`}{" "}
          <Link href={`/runs/${data.execution.runId}`}>Open the run</Link>
        </p>
      )}

      {data.messages.length > 0 && (
        <ul className="stack-sm" aria-label="Your messages to the planner" data-testid="planning-messages">
          {data.messages.map((message) => (
            <li key={message.id} data-delivered={message.deliveredAt ? "yes" : "no"}>
              <strong>{message.author}:</strong> {message.message}{" "}
              <span className="muted">
                {message.deliveredAt ? "— the planner has it" : "— the planner sees it with its next step"}
              </span>
            </li>
          ))}
        </ul>
      )}
      {open && <MessageForm sessionId={sessionId} external={data.kind === "external"} />}

      {question && data.status === "awaiting_answer" && (
        <AnswerForm sessionId={sessionId} questionId={question.id} question={question.question} />
      )}

      {/* The plan's review state, Reject and Edit (components/planning/session-decision.tsx). */}
      {data.planId && (data.status === "completed" || (data.status === "cancelled" && data.kind === "external")) && (
        <SessionDecision session={data} />
      )}

      {data.status === "invalid" && data.failure?.error_type === "plan_validation_failed" && (
        <div className="card stack-sm" role="alert" data-testid="plan-validation-failed">
          <strong>
            The planner&apos;s plan still failed the quality gates after {data.maxRefinements} refinements, so it was
            not accepted.
          </strong>
          <p>{data.failure.message}</p>
          <ul>
            {data.failure.details.map((detail, index) => (
              <li key={index} className="issue">
                {detail}
              </li>
            ))}
          </ul>
          <details>
            <summary>The rejected draft</summary>
            <pre className="args mono">{JSON.stringify(data.draft, null, 2)}</pre>
          </details>
          <details>
            <summary>As JSON (seed 003 plan_validation_failed)</summary>
            <pre className="args mono">
              {JSON.stringify(
                {
                  status: data.failure.status,
                  error_type: data.failure.error_type,
                  message: data.failure.message,
                  details: data.failure.details,
                },
                null,
                2,
              )}
            </pre>
          </details>
        </div>
      )}

      {data.status === "failed" && data.failure && (
        <div className="card stack-sm" role="alert" data-testid="planning-failed">
          <strong>Planning failed.</strong>
          <p>{data.failure.message}</p>
        </div>
      )}

      {data.status === "cancelled" && !(data.kind === "external" && data.planId) && (
        <p role="status" className="muted" data-testid="planning-cancelled">
          {data.failure && "message" in data.failure ? `${data.failure.message} ` : "Planning was cancelled. "}
          Nothing was saved.
        </p>
      )}

      {!open && data.status !== "completed" && !(data.kind === "external" && data.planId) && (
        <div className="row">
          <button
            type="button"
            className="primary"
            onClick={() => retry.mutate({ sessionId })}
            disabled={retry.isPending}
          >
            {retry.isPending ? "Starting…" : "Retry planning"}
          </button>
          <Link href="/tasks/new">New task</Link>
          <Link href="/plans/new">Write the plan by hand</Link>
        </div>
      )}
      <ErrorMessage error={retry.error} />

      <section className="stack-sm" aria-labelledby={`progress-${sessionId}`}>
        <h2 id={`progress-${sessionId}`}>Progress</h2>
        {lines.length === 0 && <p className="muted">{open ? "Starting…" : "No progress recorded."}</p>}
        <ol className="stack-sm" aria-label="Planning progress" aria-live="polite" data-testid="planning-progress">
          {lines.map((line) => (
            <li key={line.seq} data-tone={line.tone} className={line.tone === "error" ? "error" : undefined}>
              {line.text}
              {line.details && (
                <ul>
                  {line.details.map((detail, index) => (
                    <li key={index}>{detail}</li>
                  ))}
                </ul>
              )}
            </li>
          ))}
        </ol>
        {open && subscription.status === "connecting" && <p className="muted">Connecting to the live progress…</p>}
        <ErrorMessage error={subscription.error} />
      </section>
      <PlanCommandBox sessionId={sessionId} />
      <UsageSummary scope={{ sessionId }} label="Model usage of this session" />
    </div>
  );
}

const DEADLINE_TEXT = {
  answer: "Unanswered, planning is cancelled",
  review: "Without a decision, the plan is rejected as timed out",
  idle: "If the agent makes no call, planning is cancelled",
} as const;

/** The wait in progress ends by itself at its timer (seed 002's timeouts): say when. */
function Deadline({ deadline }: { deadline: { kind: keyof typeof DEADLINE_TEXT; at: string } }) {
  const now = useNow(1000);
  return (
    <p className="warn-text" data-testid="planning-deadline" data-deadline-kind={deadline.kind}>
      {DEADLINE_TEXT[deadline.kind]} — {formatTimeLeft(deadline.at, now || Date.now())}.
    </p>
  );
}

/** Seed 002: a new message while the planner gathers becomes part of its context. */
function MessageForm({ sessionId, external }: { sessionId: string; external: boolean }) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const id = useId();
  const [message, setMessage] = useState("");
  const send = useMutation(
    trpc.planner.message.mutationOptions({
      onSuccess: () => {
        setMessage("");
        void queryClient.invalidateQueries({ queryKey: trpc.planner.session.queryKey({ sessionId }) });
      },
    }),
  );
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (message.trim()) send.mutate({ sessionId, message: message.trim() });
  };
  return (
    <form className="card stack-sm" onSubmit={submit} aria-label="Message to the planner">
      <label className="field" htmlFor={`${id}-message`}>
        <span>{external ? "Add a message for the planning agent" : "Add a message for the planner"}</span>
        <textarea
          id={`${id}-message`}
          rows={2}
          maxLength={4_000}
          value={message}
          onChange={(event) => setMessage(event.target.value)}
          placeholder="Something it should also take into account"
        />
      </label>
      <div className="row">
        <button type="submit" disabled={send.isPending || !message.trim()}>
          {send.isPending ? "Sending…" : "Send message"}
        </button>
      </div>
      <ErrorMessage error={send.error} />
    </form>
  );
}

function AnswerForm({ sessionId, questionId, question }: { sessionId: string; questionId: string; question: string }) {
  const trpc = useTRPC();
  const id = useId();
  const [answer, setAnswer] = useState("");
  const send = useMutation(trpc.planner.answer.mutationOptions());
  const submit = (event: FormEvent) => {
    event.preventDefault();
    send.mutate({ sessionId, questionId, answer });
  };
  return (
    <form className="card stack-sm" onSubmit={submit} aria-label="Question from the planner">
      <strong id={`${id}-question`}>The planner asks: {question}</strong>
      <label className="field" htmlFor={`${id}-answer`}>
        <span>Your answer</span>
        <textarea
          id={`${id}-answer`}
          rows={3}
          value={answer}
          onChange={(event) => setAnswer(event.target.value)}
          aria-describedby={`${id}-question`}
          autoFocus
          required
        />
      </label>
      <div className="row">
        <button type="submit" className="primary" disabled={send.isPending || !answer.trim()}>
          {send.isPending ? "Sending…" : "Send answer"}
        </button>
      </div>
      <ErrorMessage error={send.error} />
    </form>
  );
}
