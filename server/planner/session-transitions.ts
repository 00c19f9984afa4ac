import { AppError, isAppError } from "../errors";
import { OPEN_PLANNING_STATUSES, type PlanningSessionStatus } from "../vocabulary";

/**
 * The rules of a planning session's status (session-store.ts applies them): which states each
 * change may come from and goes to, how a refusal reads, and how a caller tells a lost race.
 */

const OPEN = OPEN_PLANNING_STATUSES;

/**
 * Every status change a session can make: the states it may come from and the one it goes to.
 * (A cancel, a failure and a timeout all end in `cancelled`/`failed`; what ended it is in
 * `failure` and in the audit.)
 */
export const TRANSITIONS = {
  /**
   * The loop (or the agent) asks the person and waits for the answer — an agent also while it
   * revises a completed session's plan that the person sent back for changes.
   */
  askQuestion: { from: ["running", "completed"], to: "awaiting_answer" },
  /** Every question is answered: planning goes on. */
  recordAnswer: { from: ["awaiting_answer"], to: "running" },
  /** The built-in planner saved its plan (a new plan, or a plan's new version). */
  complete: { from: OPEN, to: "completed" },
  /**
   * An agent submits its plan for review — again after the person sent it back for changes, when
   * the session is completed already and the plan gets its next version.
   */
  submitPlan: { from: ["running", "awaiting_answer", "completed"], to: "completed" },
  /** The plan did not pass the gates. */
  markInvalid: { from: OPEN, to: "invalid" },
  /** A provider or internal error ended the loop. */
  fail: { from: OPEN, to: "failed" },
  /** A person (or the agent, leaving plan mode) cancelled. */
  cancel: { from: OPEN, to: "cancelled" },
  /** Nobody answered the question in time. */
  timeOutQuestion: { from: ["awaiting_answer"], to: "cancelled" },
  /** An agent in plan mode made no call for the idle limit while gathering. */
  timeOutIdle: { from: ["running"], to: "cancelled" },
  /** A person rejected the plan an agent planned (or is planning) for: its plan mode ends. */
  endForRejectedPlan: { from: ["running", "awaiting_answer", "completed"], to: "cancelled" },
  /** The rejection was the review timer's: the session records why (it is cancelled already). */
  recordReviewTimeout: { from: ["cancelled"], to: "cancelled" },
} as const satisfies Record<string, { from: readonly PlanningSessionStatus[]; to: PlanningSessionStatus }>;

export type TransitionName = keyof typeof TRANSITIONS;

/** The refusal's details, so a caller (and a test) can tell which rule refused. */
export interface RefusedTransition {
  sessionId: string;
  transition: TransitionName;
  status: PlanningSessionStatus;
  allowed: readonly PlanningSessionStatus[];
}

/** A transition refused because the session had already moved on (a cancel won the race, say). */
export function lostRace(error: unknown): error is AppError & { details: RefusedTransition } {
  return (
    isAppError(error) &&
    error.code === "invalid_state" &&
    typeof (error.details as RefusedTransition | undefined)?.transition === "string"
  );
}

export const STATUS_WORDS: Record<PlanningSessionStatus, string> = {
  running: "running",
  awaiting_answer: "waiting for an answer",
  completed: "completed",
  invalid: "ended without a valid plan",
  failed: "failed",
  cancelled: "cancelled",
};
