import type { StepStatus } from "../plan-schema";

/**
 * The step state machine — the one place that says which status may follow which.
 *
 *   pending ──deps satisfied──▶ ready ──picked by a worker──▶ running ──▶ completed
 *      │                          ▲                              │  ╲
 *      │ gated                    │ approved                     │   ╲ retryable error, attempts left
 *      ▼                          │                              │    ▶ ready (re-queued with backoff)
 *   awaiting_approval ────────────┘                              ▼
 *      │ denied / timed out                                    failed ──user retry──▶ ready
 *      ▼                                                         │ user skip
 *   skipped ◀────────────────────────────────────────────────────┘
 *
 *   ready ──ask_user──▶ awaiting_input ──answered──▶ completed (the answer is the output)
 *
 *   agent tasks (seed 003) are worked on by an agent, never by a worker:
 *   pending ──deps satisfied (or approved)──▶ awaiting_agent ──IN_PROGRESS──▶ running ──DONE──▶ completed
 *                                               │   ▲                            │
 *                                               │   └────────────TODO────────────┘
 *                                               ├──DONE──▶ completed (done without saying it started)
 *                                               └──CANCELLED──▶ skipped (from running: via TODO first)
 *
 *   pending ──a dependency failed──▶ blocked ──the dependency is retried──▶ pending
 *   pending ──a skipped dependency's output is referenced──▶ skipped
 *   any non-final state ──run cancelled──▶ cancelled
 *   awaiting_approval / awaiting_agent ──a new plan version changed the step──▶ pending
 *   ready ──claimed without an approval of its current definition──▶ awaiting_approval
 *
 * "Final" states end a step's part in a run: completed, skipped, cancelled, and — until a person
 * intervenes — failed and blocked.
 */
export const STEP_TRANSITIONS: Readonly<Record<StepStatus, readonly StepStatus[]>> = {
  pending: ["ready", "awaiting_agent", "awaiting_approval", "blocked", "skipped", "cancelled"],
  // A newer plan version that changes a waiting step's definition decides it again from pending.
  awaiting_approval: ["ready", "awaiting_agent", "pending", "skipped", "cancelled"],
  // An ask_user step is answered by a person, not executed: the answer is its output.
  awaiting_input: ["completed", "cancelled"],
  // An agent task waits for an agent to take it (IN_PROGRESS), finish it (DONE) or drop it.
  awaiting_agent: ["running", "completed", "pending", "skipped", "cancelled"],
  // ask_user steps wait for their answer instead of running; an unaskable question fails. A ready
  // step goes (back) to awaiting_approval when its approval does not cover its current definition,
  // or when the claiming worker cannot give the confinement an ungated step relied on.
  ready: ["running", "awaiting_input", "awaiting_approval", "failed", "skipped", "cancelled"],
  // An agent may hand its task back (TODO) or drop it (CANCELLED).
  running: ["completed", "failed", "ready", "awaiting_agent", "cancelled"],
  // A recovery that changes the plan (new args, inserted steps) decides the step again.
  failed: ["ready", "pending", "skipped"],
  blocked: ["pending", "cancelled"],
  completed: [],
  skipped: [],
  cancelled: [],
};

export function canTransition(from: StepStatus, to: StepStatus): boolean {
  return STEP_TRANSITIONS[from].includes(to);
}

/** A step status change the table above refuses: a bug in the engine, never a person's mistake. */
export class IllegalTransitionError extends Error {
  constructor(
    readonly stepId: string,
    readonly from: StepStatus | undefined,
    readonly to: StepStatus,
  ) {
    super(
      from === undefined
        ? `Illegal step transition: ${stepId} cannot become ${to} while its current status is unknown (not loaded)`
        : `Illegal step transition: ${stepId} cannot go from ${from} to ${to} (${from} may become: ${
            STEP_TRANSITIONS[from].join(", ") || "nothing"
          })`,
    );
    this.name = "IllegalTransitionError";
  }
}

/** Throws IllegalTransitionError unless `stepId` may move from `from` to `to`. */
export function assertTransition(stepId: string, from: StepStatus | undefined, to: StepStatus): void {
  if (from === undefined || !canTransition(from, to)) throw new IllegalTransitionError(stepId, from, to);
}

export { RUN_STATUSES, type RunStatus } from "../vocabulary";
