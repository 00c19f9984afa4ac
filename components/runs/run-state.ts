import type { RunStepView, RunView } from "@/server/engine/run-view";
import type { StepStatus } from "@/server/plan-schema";
import type { StoredEvent } from "@/server/events/types";
import {
  FINISHED_RUN_STATUSES,
  isIn,
  SETTLED_STEP_STATUSES,
  WAITING_FOR_PERSON_STEP_STATUSES,
} from "@/server/vocabulary";

/** `step.<status>`: the events that change a step's status (not retrying, progress or logs). */
export type StepStatusEvent = Extract<StoredEvent, { type: `step.${StepStatus}` }>;
/** Events that carry a run's new status. */
export type RunStatusEvent = Extract<StoredEvent, { data: { status: LiveRun["status"] }; type: `run.${string}` }>;

export function isStepStatusEvent(event: StoredEvent): event is StepStatusEvent {
  return event.type.startsWith("step.") && event.type !== "step.retrying" && "status" in event.data;
}

export function isRunStatusEvent(event: StoredEvent): event is RunStatusEvent {
  return event.type.startsWith("run.") && "status" in event.data;
}

/** What a waiting step waits for; the snapshot carries it (when the server provides it) and events update it. */
export interface StepWaiting {
  kind: "approval" | "input" | "agent" | "child_run";
  /** The agent working on an agent task in progress. */
  agent?: string;
  /** The agent reported it DONE; Stepwise is committing, checking and merging it. */
  merging?: boolean;
  /** A sub-plan step's child run, once started. */
  runId?: string;
  question?: string;
  choices?: string[];
  expiresAt?: string;
}

export interface LogLine {
  seq: number;
  message: string;
  level: string;
  at: string;
}

export interface StepDecision {
  decision: "approved" | "denied";
  actor: string;
  actorKind?: string | null;
  comment: string | null;
  at: string;
}

/** A step as the browser shows it: the snapshot's view plus what only events carry. */
export interface LiveStep extends Omit<RunStepView, "waiting"> {
  waiting?: StepWaiting;
  /** Log lines that arrived after the snapshot, oldest first. Earlier lines are read on demand. */
  liveLogs: LogLine[];
  progressMessage?: string;
  decision?: StepDecision;
  /** The last failed attempt that is being retried, and when the retry starts. */
  retrying?: { attempt: number; error: string; retryAt: string };
}

/** A run as the browser shows it: the snapshot with every later event applied, in order. */
export interface LiveRun extends Omit<RunView, "steps"> {
  steps: LiveStep[];
  /** Step id → index into `steps`; shared by every state derived from one snapshot. */
  stepIndex: ReadonlyMap<string, number>;
  /** The sequence number the snapshot reflected; events after it were received live. */
  snapshotSeq: number;
  /**
   * Events received live, in order. The array is shared between successive states and only ever
   * appended to, so recording an event costs O(1) instead of a copy; a state sees exactly its
   * first `eventCount` entries (use `liveEvents`).
   */
  events: StoredEvent[];
  eventCount: number;
  /** Events that arrived with a sequence number already applied: the stream repeated itself. */
  duplicates: number;
  /** Set when an event arrived after a missing one: the view can no longer be trusted until resynced. */
  gap?: { expected: number; received: number };
  /** The run's plan changed (a recovery inserted steps): the view must be rebuilt from a fresh snapshot. */
  planChanged?: boolean;
  /** The last signal event of an agent session's run: the session panel reloads its signals then. */
  signalSeq?: number;
  reason?: string | null;
  /** The run this one re-runs from a chosen step, if any. */
  rerunOf?: string;
}

const MAX_LIVE_LOG_LINES = 2000;

export function fromSnapshot(snapshot: RunView): LiveRun {
  const steps: LiveStep[] = snapshot.steps.map((step) => ({ ...step, liveLogs: [] }));
  return {
    ...snapshot,
    steps,
    stepIndex: new Map(steps.map((step, index) => [step.stepId, index])),
    snapshotSeq: snapshot.lastSeq,
    events: [],
    eventCount: 0,
    duplicates: 0,
  };
}

/** The events this state has received live, oldest first (a copy of at most `limit` of the newest). */
export function liveEvents(run: LiveRun, limit = Infinity): StoredEvent[] {
  return run.events.slice(Math.max(0, run.eventCount - limit), run.eventCount);
}

function appendShared(run: LiveRun, event: StoredEvent): StoredEvent[] {
  // Another state derived from the same predecessor appended already (React may call updaters
  // twice): branch off with a copy rather than let two histories share one array.
  const events = run.events.length === run.eventCount ? run.events : run.events.slice(0, run.eventCount);
  events.push(event);
  return events;
}

/**
 * Applies one event. Events at or below the run's last sequence number are counted as duplicates
 * and change nothing else; an event after a missing one records the gap and is not applied.
 * Costs O(1) plus one copy of the steps array when the event concerns a step.
 */
const SESSION_EVENTS: ReadonlySet<string> = new Set([
  "signal.raised",
  "signal.cleared",
  "agent.task_leased",
  "agent.lease_expired",
  "agent.concurrency_set",
  "task.verified",
  "task.merged",
  "task.merge_conflict",
  "task.reported",
  "task.report_ended",
  "step.running",
  "step.completed",
  "step.skipped",
  "step.awaiting_agent",
]);

export function applyEvent(run: LiveRun, event: StoredEvent): LiveRun {
  if (event.seq <= run.lastSeq) return { ...run, duplicates: run.duplicates + 1 };
  if (run.gap) return run;
  if (event.seq !== run.lastSeq + 1) return { ...run, gap: { expected: run.lastSeq + 1, received: event.seq } };
  const next: LiveRun = {
    ...run,
    lastSeq: event.seq,
    events: appendShared(run, event),
    eventCount: run.eventCount + 1,
  };
  if (event.type === "run.plan_changed") next.planChanged = true;
  // The session panel reloads on signals, on every change of who works on what, and on verifier
  // results and merges of agent tasks.
  if (SESSION_EVENTS.has(event.type)) next.signalSeq = event.seq;
  if (isRunStatusEvent(event)) {
    const { data } = event;
    next.status = data.status;
    next.finishedAt = isIn(FINISHED_RUN_STATUSES, data.status) ? event.createdAt : null;
    if ("reason" in data && typeof data.reason === "string") next.reason = data.reason;
  }
  const index = event.stepId === null ? undefined : run.stepIndex.get(event.stepId);
  // A fan-out made its instances, or an instance the snapshot did not have moved: they are rows of
  // the run now, read with a fresh snapshot.
  if (madeInstances(event) || (index === undefined && isInstanceEvent(event))) next.planChanged = true;
  if (index !== undefined) {
    const updated = applyStepEvent(run.steps[index]!, event);
    if (updated !== run.steps[index]) {
      next.steps = run.steps.slice();
      next.steps[index] = updated;
    }
  }
  return next;
}

function madeInstances(event: StoredEvent): boolean {
  const instances = (event.data as { instances?: unknown }).instances;
  return Array.isArray(instances) && instances.length > 0;
}

function isInstanceEvent(event: StoredEvent): boolean {
  return typeof (event.data as { group?: unknown }).group === "string";
}

function applyStepEvent(step: LiveStep, event: StoredEvent): LiveStep {
  const updated: LiveStep = { ...step };
  switch (event.type) {
    case "step.progress":
      updated.progress = event.data.progress;
      if (event.data.message !== undefined) updated.progressMessage = event.data.message;
      return updated;
    case "step.log": {
      const added = event.data.lines.map((line) => ({ seq: event.seq, ...line }));
      const all = step.liveLogs.concat(added);
      updated.liveLogs = all.length > MAX_LIVE_LOG_LINES ? all.slice(-MAX_LIVE_LOG_LINES) : all;
      return updated;
    }
    case "approval.requested":
    case "approval.expiring":
      updated.waiting = { ...step.waiting, kind: "approval", expiresAt: event.data.expiresAt };
      return updated;
    case "task.reported":
      updated.waiting = {
        ...(step.waiting?.kind === "agent" && step.waiting),
        kind: "agent",
        agent: event.data.agent,
        merging: true,
      };
      return updated;
    case "task.report_ended":
      if (step.waiting?.kind === "agent") {
        const { merging: _ended, ...still } = step.waiting;
        updated.waiting = still;
      }
      return updated;
    case "child_run.started":
      updated.waiting = { kind: "child_run", runId: event.data.childRunId };
      return updated;
    case "input.requested":
      updated.waiting = {
        kind: "input",
        question: event.data.question,
        ...(event.data.choices && { choices: event.data.choices }),
      };
      return updated;
    case "approval.decided":
      updated.decision = {
        decision: event.data.decision,
        actor: event.data.actor,
        actorKind: event.data.actorKind ?? null,
        comment: event.data.comment,
        at: event.createdAt,
      };
      return updated;
    case "step.retrying": {
      const { data } = event;
      updated.status = "ready";
      updated.attempt = data.attempt;
      updated.retrying = {
        attempt: data.attempt,
        error: data.error,
        retryAt: new Date(Date.parse(event.createdAt) + data.delayMs).toISOString(),
      };
      return updated;
    }
  }
  if (!isStepStatusEvent(event)) return step;
  const { data } = event;
  const status = data.status;
  updated.status = status;
  if (typeof data.attempt === "number") updated.attempt = data.attempt;
  // An empty reason clears it (a blocked step returning to pending).
  if (typeof data.reason === "string") updated.reason = data.reason || null;
  if (data.result) updated.result = data.result;
  if (!isIn(WAITING_FOR_PERSON_STEP_STATUSES, status)) delete updated.waiting;
  // What an approval would let run is the snapshot's; once the step moves on it is asked for anew.
  if (status !== "awaiting_approval") delete updated.approval;
  if (status === "awaiting_agent") updated.waiting = { kind: "agent" };
  if (status === "running" && typeof data.agent === "string") updated.waiting = { kind: "agent", agent: data.agent };
  if (status === "running") updated.worker = typeof data.worker === "string" ? data.worker : null;
  if (status === "running") {
    updated.startedAt = event.createdAt;
    updated.finishedAt = null;
    updated.progress = 0;
    updated.result = null;
    updated.reason = null;
    delete updated.progressMessage;
    delete updated.retrying;
  }
  if (status === "completed") updated.progress = 100;
  updated.finishedAt = isIn(SETTLED_STEP_STATUSES, status) ? event.createdAt : null;
  return updated;
}

/** Steps waiting for a person, in plan order. */
export function waitingSteps(run: LiveRun): LiveStep[] {
  return run.steps.filter((step) => isIn(WAITING_FOR_PERSON_STEP_STATUSES, step.status));
}

export function isFinished(status: string): boolean {
  return isIn(FINISHED_RUN_STATUSES, status);
}
