import { describe, expect, it } from "vitest";
import { illegalTransitions, sequenceProblems } from "../../tests/probe-tool";
import type { StoredEvent } from "../events/types";
import { STEP_STATUSES, type StepStatus } from "../plan-schema";
import type { RunGraph } from "./graph";
import { RunTransaction, type RunRow } from "./run-transaction";
import {
  assertTransition,
  canTransition,
  IllegalTransitionError,
  RUN_STATUSES,
  STEP_TRANSITIONS,
} from "./state-machine";
import { FINISHED_RUN_STATUSES, isIn, SETTLED_STEP_STATUSES } from "../vocabulary";

/**
 * Every transition the engine may make, with the engine path that makes it. This list is the
 * specification the table is checked against: changing the table means changing this list too.
 */
const ALLOWED: [StepStatus, StepStatus, string][] = [
  ["pending", "ready", "its dependencies are satisfied"],
  ["pending", "awaiting_approval", "its dependencies are satisfied and it is gated"],
  ["pending", "blocked", "a dependency failed or is blocked"],
  ["pending", "skipped", "a skipped dependency's output is referenced"],
  ["pending", "cancelled", "the run is cancelled"],
  ["awaiting_approval", "ready", "approved"],
  ["awaiting_approval", "skipped", "denied, or the approval timed out"],
  ["awaiting_approval", "cancelled", "the run is cancelled"],
  ["awaiting_input", "completed", "the question was answered; the answer is the output"],
  ["awaiting_input", "cancelled", "the run is cancelled"],
  ["pending", "awaiting_agent", "an agent task's dependencies are satisfied"],
  ["awaiting_approval", "awaiting_agent", "a gated agent task was approved"],
  ["awaiting_agent", "running", "the agent took it (IN_PROGRESS)"],
  ["awaiting_agent", "completed", "the agent reported it DONE"],
  ["awaiting_agent", "skipped", "the agent CANCELLED it"],
  ["awaiting_agent", "cancelled", "the run is cancelled"],
  ["running", "awaiting_agent", "the agent handed its task back (TODO), or cancels it from IN_PROGRESS"],
  ["ready", "running", "a worker claimed it"],
  ["ready", "awaiting_input", "an ask_user step waits for its answer instead of running"],
  ["ready", "awaiting_approval", "the claiming worker cannot give the confinement an ungated step relied on"],
  ["ready", "failed", "an ask_user step whose question cannot be asked"],
  ["ready", "skipped", "skipped before it started"],
  ["ready", "cancelled", "the run is cancelled"],
  ["running", "completed", "the tool succeeded"],
  ["running", "failed", "the tool failed with no attempts left, or was interrupted and is not idempotent"],
  ["running", "ready", "a retryable error with attempts left, or an idempotent step interrupted by a dead worker"],
  ["running", "cancelled", "the run is cancelled (the tool is aborted)"],
  ["failed", "ready", "a person retries it"],
  ["failed", "pending", "an accepted recovery changes the plan (new args, inserted steps), so it is decided again"],
  ["failed", "skipped", "a person skips it"],
  ["blocked", "pending", "the dependency that blocked it is retried or skipped"],
  ["blocked", "cancelled", "the run is cancelled"],
  ["awaiting_approval", "pending", "a new plan version changed the gated step, so it is decided again"],
  ["awaiting_agent", "pending", "a new plan version changed the agent task, so it is decided again"],
];

/** Transitions that must never happen, and why. */
const REFUSED: [StepStatus, StepStatus, string][] = [
  ["pending", "running", "a step is claimed only once it is ready"],
  ["pending", "completed", "nothing completes without running or being answered"],
  ["awaiting_approval", "running", "a gated step runs only after its approval made it ready"],
  ["awaiting_approval", "completed", "approval does not complete a step"],
  ["awaiting_approval", "failed", "a denial skips, it does not fail"],
  ["awaiting_input", "running", "a question is answered by a person, not executed"],
  ["ready", "awaiting_agent", "agent tasks never go through the worker queue"],
  ["awaiting_agent", "ready", "an agent task is never queued for a worker"],
  ["awaiting_agent", "failed", "an agent reports DONE, TODO or CANCELLED; it cannot fail a task"],
  ["ready", "completed", "a ready step must run first"],
  ["ready", "pending", "readiness is never taken back"],
  ["running", "pending", "a running step is retried through ready, never re-decided"],
  ["running", "skipped", "a step is not skipped while its tool runs"],
  ["running", "awaiting_approval", "approval is asked before running, not during"],
  ["blocked", "ready", "an unblocked step is re-decided from pending (it may need approval)"],
  ["blocked", "running", "a blocked step never runs directly"],
  ["failed", "completed", "a failure is not turned into a success without a new attempt"],
  ["failed", "running", "a retry goes through ready and the queue"],
  ["failed", "cancelled", "cancelling a run keeps the record of what failed"],
  ["completed", "running", "a completed step never runs again"],
  ["completed", "ready", "a completed step is never re-queued"],
  ["completed", "failed", "a recorded result is never replaced"],
  ["skipped", "ready", "a skipped step stays skipped"],
  ["cancelled", "ready", "a cancelled run's steps stay cancelled"],
  ["cancelled", "running", "a cancelled step never starts"],
];

const FINAL: StepStatus[] = ["completed", "skipped", "cancelled"];

function reachableFrom(start: StepStatus): Set<StepStatus> {
  const seen = new Set<StepStatus>([start]);
  const queue = [start];
  while (queue.length > 0) {
    for (const next of STEP_TRANSITIONS[queue.shift()!]) {
      if (!seen.has(next)) {
        seen.add(next);
        queue.push(next);
      }
    }
  }
  return seen;
}

describe("step state machine", () => {
  it("has one row per step status, listing only known statuses, without self-loops or duplicates", () => {
    expect(Object.keys(STEP_TRANSITIONS).sort()).toEqual([...STEP_STATUSES].sort());
    for (const [from, targets] of Object.entries(STEP_TRANSITIONS) as [StepStatus, readonly StepStatus[]][]) {
      expect(new Set(targets).size, from).toBe(targets.length);
      expect(targets, from).not.toContain(from);
      for (const to of targets) expect(STEP_STATUSES, `${from} → ${to}`).toContain(to);
    }
  });

  it.each(ALLOWED)("allows %s → %s (%s)", (from, to) => {
    expect(canTransition(from, to)).toBe(true);
  });

  it("allows exactly the documented transitions and nothing else", () => {
    const table = STEP_STATUSES.flatMap((from) => STEP_TRANSITIONS[from].map((to) => `${from} → ${to}`));
    expect(table.sort()).toEqual(ALLOWED.map(([from, to]) => `${from} → ${to}`).sort());
    // Every other pair is refused.
    const allowed = new Set(table);
    for (const from of STEP_STATUSES) {
      for (const to of STEP_STATUSES) {
        expect(canTransition(from, to), `${from} → ${to}`).toBe(allowed.has(`${from} → ${to}`));
      }
    }
  });

  it.each(REFUSED)("refuses %s → %s (%s)", (from, to) => {
    expect(canTransition(from, to)).toBe(false);
  });

  it.each(FINAL)("final state %s has no exit", (status) => {
    expect(STEP_TRANSITIONS[status]).toEqual([]);
    for (const to of STEP_STATUSES) expect(canTransition(status, to), `${status} → ${to}`).toBe(false);
  });

  it("every status is reachable from pending, and every status can still end in a final state", () => {
    expect([...reachableFrom("pending")].sort()).toEqual([...STEP_STATUSES].sort());
    for (const status of STEP_STATUSES) {
      const reachable = reachableFrom(status);
      expect(
        FINAL.some((final) => reachable.has(final)),
        `${status} can reach a final state`,
      ).toBe(true);
    }
  });

  it("settled statuses are the final ones plus failed and blocked, which only a person's intervention reopens", () => {
    expect([...SETTLED_STEP_STATUSES].sort()).toEqual([...FINAL, "failed", "blocked"].sort());
    // Leaving failed/blocked means a retry, recovery or skip (failed → ready/pending/skipped,
    // blocked → pending) or a cancel.
    expect([...STEP_TRANSITIONS.failed].sort()).toEqual(["pending", "ready", "skipped"]);
    expect([...STEP_TRANSITIONS.blocked].sort()).toEqual(["cancelled", "pending"]);
  });

  it("finished run statuses are completed, failed and cancelled", () => {
    expect([...FINISHED_RUN_STATUSES].sort()).toEqual(["cancelled", "completed", "failed"]);
    for (const status of FINISHED_RUN_STATUSES) expect(RUN_STATUSES).toContain(status);
    expect(isIn(FINISHED_RUN_STATUSES, "paused")).toBe(false);
    expect(isIn(FINISHED_RUN_STATUSES, "failing")).toBe(false);
  });
});

describe("status changes are checked at runtime", () => {
  it.each(ALLOWED)("assertTransition lets %s → %s through", (from, to) => {
    expect(() => assertTransition("step_1", from, to)).not.toThrow();
  });

  it.each(REFUSED)("assertTransition throws on %s → %s", (from, to) => {
    expect(() => assertTransition("step_1", from, to)).toThrow(IllegalTransitionError);
    expect(() => assertTransition("step_1", from, to)).toThrow(`step_1 cannot go from ${from} to ${to}`);
  });

  it("assertTransition throws when the current status is unknown", () => {
    expect(() => assertTransition("step_1", undefined, "ready")).toThrow(/status is unknown/);
  });

  // No database: setStatus and noteStatus only touch the transaction's memory.
  const transaction = () => new RunTransaction({} as never, { id: "run" } as RunRow, {} as RunGraph, new Date(0));

  it("the engine's setStatus refuses an illegal change and records nothing", () => {
    const tx = transaction();
    tx.statuses.set("step_1", "awaiting_approval");
    expect(() => tx.setStatus("step_1", "running")).toThrow(IllegalTransitionError);
    expect(tx.statuses.get("step_1")).toBe("awaiting_approval");
    expect(tx.events).toEqual([]);
    expect(() => tx.setStatus("step_2", "ready")).toThrow(/status is unknown/);
    expect(() => tx.noteStatus("step_1", "completed")).toThrow(IllegalTransitionError);
  });

  it("the engine's setStatus applies a legal change", () => {
    const tx = transaction();
    tx.statuses.set("step_1", "awaiting_approval");
    tx.setStatus("step_1", "ready");
    expect(tx.statuses.get("step_1")).toBe("ready");
    expect(tx.events).toEqual([{ type: "step.ready", stepId: "step_1", data: { status: "ready" } }]);
    tx.noteStatus("step_1", "running");
    expect(tx.statuses.get("step_1")).toBe("running");
  });
});

/** The replay checks the integration tests rely on must themselves catch what they claim to. */
describe("event stream checks used by the engine's integration tests", () => {
  const event = (seq: number, type: string, stepId: string | null, data: Record<string, unknown>): StoredEvent =>
    ({
      streamId: "run",
      seq,
      type,
      planId: "plan-00000000",
      runId: "run",
      stepId,
      traceId: "trace",
      data,
      createdAt: new Date(0).toISOString(),
    }) as StoredEvent;
  const started = event(1, "run.started", null, { steps: [{ id: "step_1", status: "pending" }] });

  it("accepts a legal history and flags a step that skipped a state", () => {
    const legal = [
      started,
      event(2, "step.awaiting_approval", "step_1", { status: "awaiting_approval" }),
      event(3, "approval.decided", "step_1", { decision: "approved" }),
      event(4, "step.ready", "step_1", { status: "ready" }),
      event(5, "step.running", "step_1", { status: "running" }),
      event(6, "step.retrying", "step_1", { status: "ready" }),
      event(7, "step.running", "step_1", { status: "running" }),
      event(8, "step.completed", "step_1", { status: "completed" }),
    ];
    expect(illegalTransitions(legal)).toEqual([]);
    const bypass = [
      started,
      event(2, "step.awaiting_approval", "step_1", { status: "awaiting_approval" }),
      event(3, "step.running", "step_1", { status: "running" }),
    ];
    expect(illegalTransitions(bypass)).toEqual(["#3 step.running step_1: awaiting_approval → running"]);
    expect(illegalTransitions([event(1, "step.ready", "step_1", { status: "ready" })])).toEqual([
      "the run has no run.started event",
    ]);
  });

  it("flags gaps and duplicates in a stream's numbering", () => {
    expect(sequenceProblems([started, event(2, "x", null, {})])).toEqual([]);
    expect(sequenceProblems([started, event(3, "x", null, {})])).toEqual(["event #2 has seq 3"]);
    expect(sequenceProblems([started, event(1, "x", null, {})])).toEqual(["event #2 has seq 1"]);
    expect(sequenceProblems([])).toEqual(["the stream has no events"]);
  });
});
