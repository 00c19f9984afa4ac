"use client";

import Link from "next/link";
import { useId, useState, type FormEvent } from "react";
import { useMutation, useQueryClient } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { SessionDecision } from "@/components/planning/session-decision";
import { formatTimeLeft } from "@/components/runs/format";
import { ErrorMessage } from "@/components/ui/error-message";
import { useNow } from "@/components/ui/use-now";
import { StatusBadge } from "@/components/ui/status-badge";
import { PlanCommandBox } from "./plan-command-box";
import {
  ExecutionLine,
  PlanningProgress,
  PlanValidationFailed,
  SessionHeading,
  SessionMessages,
} from "./planning-session-parts";
import { UsageSummary } from "./usage-summary";
import { usePlanningSession } from "./use-planning-session";
import { isIn, OPEN_PLANNING_STATUSES } from "@/server/vocabulary";

/** A planning session live: progress as it happens, questions to answer, cancel, and the outcome. */
export function PlanningSessionView({ sessionId }: { sessionId: string }) {
  const { session, lines, subscription, cancel, retry } = usePlanningSession(sessionId);

  if (session.isPending) return <p aria-busy="true">Loading the planning session…</p>;
  if (session.error) return <ErrorMessage error={session.error} />;
  const data = session.data;
  const open = isIn(OPEN_PLANNING_STATUSES, data.status);
  const question = data.questions.find((candidate) => candidate.answer === null);

  return (
    <div className="stack" data-session-status={data.status} data-testid="planning-session">
      <div className="row spread">
        <SessionHeading data={data} />
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

      {data.unserved && (
        <p role="status" className="warn-text" data-testid="planning-unserved">
          {data.unserved}
        </p>
      )}
      {data.deadline && <Deadline deadline={data.deadline} />}
      {data.execution && <ExecutionLine execution={data.execution} />}

      {data.messages.length > 0 && <SessionMessages messages={data.messages} />}
      {open && <MessageForm sessionId={sessionId} external={data.kind === "external"} />}

      {question && data.status === "awaiting_answer" && (
        <AnswerForm sessionId={sessionId} questionId={question.id} question={question.question} />
      )}

      {/* The plan's review state, Reject and Edit (components/planning/session-decision.tsx). */}
      {data.planId && (data.status === "completed" || (data.status === "cancelled" && data.kind === "external")) && (
        <SessionDecision session={data} />
      )}

      {data.status === "invalid" && data.failure?.error_type === "plan_validation_failed" && (
        <PlanValidationFailed data={data} failure={data.failure} />
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

      <PlanningProgress sessionId={sessionId} lines={lines} open={open} subscription={subscription} />
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
