"use client";

import Link from "next/link";
import { ErrorMessage } from "@/components/ui/error-message";
import { formatCost, formatTokens, type ProgressLine } from "./planner-format";
import type { PlanningSessionData, PlanningSubscription } from "./use-planning-session";
import { FINISHED_RUN_STATUSES, isIn } from "@/server/vocabulary";

/** What is being planned, and how: mode, model, trace and what it has cost so far. */
export function SessionHeading({ data }: { data: PlanningSessionData }) {
  return (
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
  );
}

/** Once its plan is approved, how far the plan's run has come. */
export function ExecutionLine({ execution }: { execution: NonNullable<PlanningSessionData["execution"]> }) {
  return (
    <p data-testid="planning-execution">
      {isIn(FINISHED_RUN_STATUSES, execution.status)
        ? `Planning is done: the approved plan's run is ${execution.status}.`
        : `Executing the approved plan: ${execution.settled} of ${execution.total} steps settled.`}{" "}
      <Link href={`/runs/${execution.runId}`}>Open the run</Link>
    </p>
  );
}

/** The person's messages to the planner, and whether the planner has them yet. */
export function SessionMessages({ messages }: { messages: PlanningSessionData["messages"] }) {
  return (
    <ul className="stack-sm" aria-label="Your messages to the planner" data-testid="planning-messages">
      {messages.map((message) => (
        <li key={message.id} data-delivered={message.deliveredAt ? "yes" : "no"}>
          <strong>{message.author}:</strong> {message.message}{" "}
          <span className="muted">
            {message.deliveredAt ? "— the planner has it" : "— the planner sees it with its next step"}
          </span>
        </li>
      ))}
    </ul>
  );
}

type ValidationFailure = Extract<NonNullable<PlanningSessionData["failure"]>, { error_type: "plan_validation_failed" }>;

/** The planner's last draft still failed the quality gates: why, the draft, and the failure as seed 003's JSON. */
export function PlanValidationFailed({ data, failure }: { data: PlanningSessionData; failure: ValidationFailure }) {
  return (
    <div className="card stack-sm" role="alert" data-testid="plan-validation-failed">
      <strong>
        The planner&apos;s plan still failed the quality gates after {data.maxRefinements} refinements, so it was not
        accepted.
      </strong>
      <p>{failure.message}</p>
      <ul>
        {failure.details.map((detail, index) => (
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
              status: failure.status,
              error_type: failure.error_type,
              message: failure.message,
              details: failure.details,
            },
            null,
            2,
          )}
        </pre>
      </details>
    </div>
  );
}

/** The planner's progress as it happens, in a live region. */
export function PlanningProgress({
  sessionId,
  lines,
  open,
  subscription,
}: {
  sessionId: string;
  lines: ProgressLine[];
  open: boolean;
  subscription: PlanningSubscription;
}) {
  return (
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
  );
}
