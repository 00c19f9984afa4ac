"use client";

import { memo } from "react";
import type { RunDecision } from "@/server/engine/run-list";
import type { Step } from "@/server/plan-schema";
import { RecoveryPanel } from "@/components/planner/recovery-panel";
import { StepUsage } from "@/components/planner/step-usage";
import { ProgressBar } from "@/components/ui/progress-bar";
import { StatusBadge } from "@/components/ui/status-badge";
import { useNow } from "@/components/ui/use-now";
import { describeValue, formatClock, formatDuration, formatTimeLeft } from "./format";
import type { LiveStep } from "./run-state";
import { AgentTaskActions, FailedStepActions, RerunForm } from "./step-actions";
import { GroupDecision } from "./group-decision";
import { StepLogs } from "./step-logs";
import { isIn, WAITING_FOR_PERSON_STEP_STATUSES } from "@/server/vocabulary";

interface RunStepCardProps {
  step: Step;
  state: LiveStep | undefined;
  runId: string;
  /** The sequence number of the page's snapshot: stored log lines are read up to it. */
  snapshotSeq: number;
  /** The decision on this step as stored when the page loaded (live decisions come with the stream). */
  storedDecision: RunDecision | undefined;
  /** False once the run is cancelled or completed: nothing can be changed any more. */
  steerable: boolean;
  /** True once the run finished: it can be re-run from any step as a new run. */
  rerunnable: boolean;
  /** In a virtualised list: the card's index among all steps, and their number, told to assistive technology. */
  index?: number;
  setSize?: number;
  /** In a virtualised list: measures the rendered card so the rows below it are placed right. */
  measureRef?: (element: HTMLLIElement | null) => void;
  /** A fan-out step: how many of its instances wait for approval. */
  groupWaiting?: number;
}

/**
 * One step of a run: what it does, its live state, attempt, timing, progress, logs, result or
 * error, why it is blocked or skipped, and the action it waits for. Memoised: an event about
 * another step does not re-render it.
 */
export const RunStepCard = memo(function RunStepCard({
  step,
  state,
  runId,
  snapshotSeq,
  storedDecision,
  steerable,
  rerunnable,
  index,
  setSize,
  measureRef,
  groupWaiting = 0,
}: RunStepCardProps) {
  const status = state?.status ?? "pending";
  const decision = state?.decision ?? storedDecision;
  return (
    <li
      className={`card step run-step status-${status}`}
      id={`step-${step.id}`}
      ref={measureRef}
      tabIndex={-1}
      data-index={index}
      aria-posinset={index === undefined ? undefined : index + 1}
      aria-setsize={setSize}
      data-step-id={step.id}
      data-status={status}
    >
      <div className="row spread">
        <div className="row">
          <span className="step-number">{step.order}</span>
          <strong>{step.title ?? step.description}</strong>
        </div>
        <div className="row">
          {step.tool === "agent_task" && <span className="tag">Agent task</span>}
          {step.approvalRequired && <span className="tag warn">Requires approval</span>}
          {step.critical && <span className="tag">Critical</span>}
          <span className="mono muted">{step.tool}</span>
          <StatusBadge status={status} />
        </div>
      </div>
      {state && (
        <div className="step-run">
          <StepTiming state={state} />
          <StepProgressNote step={step} state={state} status={status} />
          {state.retrying && status === "ready" && (
            <p className="warn-text" data-testid="retrying">
              Attempt {state.retrying.attempt} failed: {state.retrying.error}. Retrying at{" "}
              {formatClock(state.retrying.retryAt)}.
            </p>
          )}
          {state.reason && (status === "blocked" || status === "skipped" || status === "cancelled") && (
            <p className="reason" data-testid="reason">
              {/* Reasons are whole sentences ("Skipped by ann after it failed"); the badge names the state. */}
              {state.reason}
            </p>
          )}
          {decision && (
            <p className="muted" data-testid="decision">
              {decision.decision === "approved" ? "Approved" : "Denied"} by{" "}
              {decision.actorKind && decision.actorKind !== "person" && `${decision.actorKind} `}
              {decision.actor}
              {decision.comment && `: “${decision.comment}”`}
            </p>
          )}
          {state.result && !state.result.ok && status === "failed" && (
            <p className="error" data-testid="step-error">
              {state.result.error}
            </p>
          )}
          {state.result?.ok && status === "completed" && <ResultValue value={state.result.value} />}
          {step.tool === "llm_generate" && (status === "completed" || status === "failed") && (
            <StepUsage runId={runId} stepId={step.id} />
          )}
          {isIn(WAITING_FOR_PERSON_STEP_STATUSES, status) && steerable && (
            <DecideAbove step={step} state={state} status={status} />
          )}
          {groupWaiting > 0 && steerable && <GroupDecision runId={runId} stepId={step.id} waiting={groupWaiting} />}
          {status === "failed" && steerable && <FailedStepActions runId={runId} stepId={step.id} />}
          {(status === "awaiting_agent" || (status === "running" && state.waiting?.kind === "agent")) && steerable && (
            <AgentTaskActions runId={runId} stepId={step.id} />
          )}
          {status === "failed" && steerable && <RecoveryPanel runId={runId} stepId={step.id} />}
          {rerunnable && <RerunForm runId={runId} stepId={step.id} args={step.args} />}
          <StepLogs runId={runId} stepId={step.id} snapshotSeq={snapshotSeq} liveLines={state.liveLogs} />
        </div>
      )}
    </li>
  );
});

/** How far a step in progress has come: waiting for an agent, an agent at work, or its own progress. */
function StepProgressNote({ step, state, status }: { step: Step; state: LiveStep; status: string }) {
  return (
    <>
      {status === "ready" && state.unserved && (
        <p className="warn-text" data-testid="unserved">
          {state.unserved}
        </p>
      )}
      {status === "awaiting_agent" && (
        <p className="agent-note" data-testid="agent-state">
          Waiting for an agent to take it.
        </p>
      )}
      {status === "running" && state.waiting?.kind === "agent" && (
        <p className="agent-note" data-testid="agent-state">
          {state.waiting.merging
            ? `${state.waiting.agent ?? "An agent"} reported it done; Stepwise is committing, checking and merging it.`
            : `${state.waiting.agent ?? "An agent"} is working on it.`}
        </p>
      )}
      {status === "running" && state.waiting?.kind === "child_run" && (
        <p className="agent-note" data-testid="child-run-state">
          {state.waiting.runId ? (
            <>
              Waiting for its sub-plan: <a href={`/runs/${state.waiting.runId}`}>the child run</a>.
            </>
          ) : (
            "Starting its sub-plan…"
          )}
        </p>
      )}
      {status === "running" && state.waiting?.kind !== "agent" && state.waiting?.kind !== "child_run" && (
        <div className="stack-sm">
          <ProgressBar value={state.progress} label={`${step.id} progress`} />
          <span className="muted" data-testid="progress">
            {state.progress}%{state.progressMessage && ` · ${state.progressMessage}`}
          </span>
        </div>
      )}
    </>
  );
}

/** The step waits for a person's approval or answer, given in "Waiting for you" above. */
function DecideAbove({ step, state, status }: { step: Step; state: LiveStep; status: string }) {
  return (
    <p className="warn-text" data-testid="decide-above">
      {status === "awaiting_approval" ? "Waiting for your approval" : "Waiting for your answer"}
      {state.waiting?.expiresAt && (
        <>
          {" "}
          (<ExpiresIn at={state.waiting.expiresAt} />)
        </>
      )}{" "}
      — <a href={`#pending-${step.id}`}>decide in “Waiting for you”</a>.
    </p>
  );
}

function StepTiming({ state }: { state: LiveStep }) {
  const running = state.status === "running";
  const now = useNow(1000, running);
  if (!state.startedAt) return null;
  const end = state.finishedAt
    ? Date.parse(state.finishedAt)
    : running
      ? Math.max(now, Date.parse(state.startedAt))
      : NaN;
  // From the step's own start and finish events, as the timeline measures it, so both agree.
  const measured = end - Date.parse(state.startedAt);
  const duration = Number.isFinite(measured) ? measured : state.result?.duration;
  return (
    <p className="muted step-timing">
      {state.attempt > 0 && <span data-testid="attempt">attempt {state.attempt}</span>} · started{" "}
      {formatClock(state.startedAt)}
      {duration !== undefined && Number.isFinite(duration) && (
        <span data-testid="duration"> · {formatDuration(duration)}</span>
      )}
      {state.worker && <span data-testid="worker"> · on {state.worker}</span>}
    </p>
  );
}

function ExpiresIn({ at }: { at: string }) {
  const now = useNow(1000);
  return <span data-testid="expires">{formatTimeLeft(at, now || Date.now())}</span>;
}

function ResultValue({ value }: { value: unknown }) {
  const { text, large } = describeValue(value);
  if (!large)
    return (
      <p className="result-inline">
        <span className="muted">Result </span>
        <code className="mono" data-testid="result">
          {text}
        </code>
      </p>
    );
  return (
    <details className="result">
      <summary>Result ({(text.length / 1024).toFixed(1)} kB)</summary>
      <pre className="mono args" data-testid="result">
        {text}
      </pre>
    </details>
  );
}
