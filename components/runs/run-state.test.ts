import { describe, expect, it } from "vitest";
import type { RunStepView, RunView } from "@/server/engine/run-view";
import type { EventData, EventType, StoredEvent } from "@/server/events/types";
import { applyEvent, fromSnapshot, liveEvents, waitingSteps, type LiveRun } from "./run-state";

const stepView = (stepId: string, overrides: Partial<RunStepView> = {}): RunStepView => ({
  stepId,
  status: "pending",
  attempt: 0,
  progress: 0,
  result: null,
  error: null,
  reason: null,
  startedAt: null,
  finishedAt: null,
  worker: null,
  ...overrides,
});

const snapshot = (overrides: Partial<RunView> = {}): RunView => ({
  id: "run_1",
  planId: "plan_1",
  planVersion: 1,
  status: "running",
  traceId: "trace",
  workspace: { id: null, name: null, path: "/tmp/ws" },
  approvedBy: "alice",
  maxParallel: 4,
  createdAt: "2024-01-01T00:00:00.000Z",
  startedAt: "2024-01-01T00:00:01.000Z",
  finishedAt: null,
  lastSeq: 5,
  steps: [stepView("step_1"), stepView("step_2")],
  ...overrides,
});

let clock = 0;
const event = <T extends EventType>(
  seq: number,
  type: T,
  data: EventData<T>,
  stepId: string | null = null,
): StoredEvent =>
  ({
    streamId: "run_1",
    seq,
    type,
    planId: "plan_1",
    runId: "run_1",
    stepId,
    traceId: "trace",
    data,
    createdAt: new Date(Date.UTC(2024, 0, 1, 0, 1, clock++)).toISOString(),
  }) as StoredEvent;

describe("fromSnapshot", () => {
  it("copies the snapshot, indexes its steps and starts with no events", () => {
    const snap = snapshot();
    const live = fromSnapshot(snap);
    expect(live).toMatchObject({ ...snap, steps: snap.steps.map((s) => ({ ...s, liveLogs: [] })) });
    expect(live.snapshotSeq).toBe(5);
    expect(live.stepIndex.get("step_2")).toBe(1);
    expect(liveEvents(live)).toEqual([]);
    expect(live).not.toBe(snap);
  });
});

describe("applyEvent", () => {
  it("shows an agent task reported DONE as merging until its report ends, keeping who holds it", () => {
    let live = fromSnapshot(snapshot({ lastSeq: 0, steps: [stepView("step_2")] }));
    live = applyEvent(live, event(1, "step.running", { status: "running", agent: "agent-7" }, "step_2"));
    expect(live.steps[0]!.waiting).toEqual({ kind: "agent", agent: "agent-7" });
    live = applyEvent(live, event(2, "task.reported", { agent: "agent-7" }, "step_2"));
    expect(live.steps[0]!.waiting).toEqual({ kind: "agent", agent: "agent-7", merging: true });
    expect(live.signalSeq).toBe(2);
    // A conflict, or a reporter refused at the merge: the report ends and the task is the agent's again.
    const ended = applyEvent(live, event(3, "task.report_ended", { outcome: "dropped", reason: "refused" }, "step_2"));
    expect(ended.steps[0]!.status).toBe("running");
    expect(ended.steps[0]!.waiting).toEqual({ kind: "agent", agent: "agent-7" });
    // Merged: DONE, and nothing is waited for.
    const done = applyEvent(live, event(3, "step.completed", { status: "completed" }, "step_2"));
    expect(done.steps[0]!.waiting).toBeUndefined();
  });

  it("names the worker a step runs on, and forgets the last one when an attempt starts elsewhere", () => {
    let live = fromSnapshot(snapshot({ lastSeq: 0, steps: [stepView("step_1", { worker: "old-host · pid 1" })] }));
    live = applyEvent(
      live,
      event(1, "step.running", { status: "running", attempt: 1, worker: "host-a · pid 42" }, "step_1"),
    );
    expect(live.steps[0]!.worker).toBe("host-a · pid 42");
    live = applyEvent(live, event(2, "step.running", { status: "running", attempt: 2 }, "step_1"));
    expect(live.steps[0]!.worker).toBeNull();
  });

  it("ignores events at or below lastSeq, counting them as duplicates", () => {
    let live = fromSnapshot(snapshot({ lastSeq: 5 }));
    for (const seq of [1, 4, 5]) {
      live = applyEvent(live, event(seq, "step.running", { status: "running", attempt: 1 }, "step_1"));
    }
    expect(live.steps[0]!.status).toBe("pending");
    expect(liveEvents(live)).toEqual([]);
    expect(live.duplicates).toBe(3);
    expect(live.lastSeq).toBe(5);
  });

  it("records a gap instead of applying an event that follows a missing one", () => {
    const live = fromSnapshot(snapshot({ lastSeq: 5 }));
    const after = applyEvent(live, event(7, "step.running", { status: "running", attempt: 1 }, "step_1"));
    expect(after.gap).toEqual({ expected: 6, received: 7 });
    expect(after.steps[0]!.status).toBe("pending");
    expect(after.lastSeq).toBe(5);
    // Nothing more is applied until the view is rebuilt from a fresh snapshot.
    expect(applyEvent(after, event(6, "step.running", { status: "running" }, "step_1"))).toBe(after);
  });

  it("advances lastSeq and records the event", () => {
    const live = fromSnapshot(snapshot());
    const e = event(
      6,
      "step.log",
      { lines: [{ message: "hi", level: "info", at: "2024-01-01T00:00:00.000Z" }] },
      "step_1",
    );
    const after = applyEvent(live, e);
    expect(after.lastSeq).toBe(6);
    expect(liveEvents(after)).toEqual([e]);
    // The replayed event is now old.
    expect(liveEvents(applyEvent(after, e))).toEqual([e]);
  });

  it("applies step status, attempt and start time without touching other steps or the input", () => {
    const live = fromSnapshot(snapshot());
    const e = event(6, "step.running", { status: "running", attempt: 2 }, "step_1");
    const after = applyEvent(live, e);
    expect(after.steps[0]).toMatchObject({ status: "running", attempt: 2, startedAt: e.createdAt, finishedAt: null });
    expect(after.steps[1]).toBe(live.steps[1]);
    expect(live.steps[0]).toEqual({ ...stepView("step_1"), liveLogs: [] });
    expect(live.lastSeq).toBe(5);
  });

  it("applies progress events", () => {
    const live = fromSnapshot(snapshot({ steps: [stepView("step_1", { status: "running" }), stepView("step_2")] }));
    const after = applyEvent(live, event(6, "step.progress", { progress: 40, message: "working" }, "step_1"));
    expect(after.steps[0]).toMatchObject({ status: "running", progress: 40 });
  });

  it("applies a completion with its result, full progress and finish time", () => {
    const result = { ok: true, value: { sleptMs: 10 }, duration: 12, timestamp: "2024-01-01T00:02:00.000Z" };
    let live = fromSnapshot(snapshot());
    live = applyEvent(live, event(6, "step.running", { status: "running", attempt: 1 }, "step_2"));
    live = applyEvent(live, event(7, "step.progress", { progress: 50 }, "step_2"));
    const done = event(8, "step.completed", { status: "completed", result }, "step_2");
    live = applyEvent(live, done);
    expect(live.steps[1]).toMatchObject({
      status: "completed",
      attempt: 1,
      progress: 100,
      result,
      finishedAt: done.createdAt,
    });
    expect(live.steps[0]!.status).toBe("pending");
    expect(liveEvents(live).map((e) => e.seq)).toEqual([6, 7, 8]);
  });

  it("applies a reason for blocked or skipped steps", () => {
    const live = fromSnapshot(snapshot());
    const e = event(6, "step.blocked", { status: "blocked", reason: "Dependency step_1 failed" }, "step_2");
    const after = applyEvent(live, e);
    expect(after.steps[1]).toMatchObject({
      status: "blocked",
      reason: "Dependency step_1 failed",
      finishedAt: e.createdAt,
    });
  });

  it("ignores events for unknown steps apart from the sequence", () => {
    const live = fromSnapshot(snapshot());
    const after = applyEvent(live, event(6, "step.running", { status: "running" }, "step_99"));
    expect(after.steps).toBe(live.steps);
    expect(after.lastSeq).toBe(6);
  });

  it("run.completed sets the run status and finishedAt", () => {
    const live = fromSnapshot(snapshot());
    const e = event(6, "run.completed", { status: "completed" });
    const after = applyEvent(live, e);
    expect(after.status).toBe("completed");
    expect(after.finishedAt).toBe(e.createdAt);
    expect(live.status).toBe("running");
    expect(live.finishedAt).toBeNull();
  });

  it.each(["failed", "cancelled"] as const)("run.%s also finishes the run", (status) => {
    const e = event(6, `run.${status}`, { status });
    const after = applyEvent(fromSnapshot(snapshot()), e);
    expect(after).toMatchObject({ status, finishedAt: e.createdAt });
  });

  it("a non-final run status does not set finishedAt", () => {
    const after = applyEvent(fromSnapshot(snapshot()), event(6, "run.failing", { status: "failing", reason: "x" }));
    expect(after.status).toBe("failing");
    expect(after.finishedAt).toBeNull();
  });

  it("non-run events without a step do not change the run status", () => {
    const after = applyEvent(
      fromSnapshot(snapshot()),
      event(6, "approval.requested", { status: "completed" } as unknown as EventData<"approval.requested">),
    );
    expect(after.status).toBe("running");
    expect(after.lastSeq).toBe(6);
  });
});

describe("applyEvent on events only the stream carries", () => {
  it("appends log lines to the step and keeps each line's sequence number", () => {
    let live = fromSnapshot(snapshot());
    live = applyEvent(
      live,
      event(
        6,
        "step.log",
        {
          lines: [
            { message: "one", level: "info", at: "t1" },
            { message: "two", level: "warn", at: "t2" },
          ],
        },
        "step_1",
      ),
    );
    live = applyEvent(live, event(7, "step.log", { lines: [{ message: "three", level: "info", at: "t3" }] }, "step_1"));
    expect(live.steps[0]!.liveLogs).toEqual([
      { seq: 6, message: "one", level: "info", at: "t1" },
      { seq: 6, message: "two", level: "warn", at: "t2" },
      { seq: 7, message: "three", level: "info", at: "t3" },
    ]);
  });

  it("tracks what a step waits for until it moves on", () => {
    let live = fromSnapshot(snapshot());
    live = applyEvent(live, event(6, "step.awaiting_approval", { status: "awaiting_approval" }, "step_1"));
    live = applyEvent(
      live,
      event(7, "approval.requested", { planVersion: 1, expiresAt: "2024-01-01T00:30:00.000Z" }, "step_1"),
    );
    live = applyEvent(live, event(8, "step.awaiting_input", { status: "awaiting_input" }, "step_2"));
    live = applyEvent(live, event(9, "input.requested", { question: "Which?", choices: ["a", "b"] }, "step_2"));
    expect(live.steps[0]!.waiting).toEqual({ kind: "approval", expiresAt: "2024-01-01T00:30:00.000Z" });
    expect(live.steps[1]!.waiting).toEqual({ kind: "input", question: "Which?", choices: ["a", "b"] });
    expect(waitingSteps(live).map((s) => s.stepId)).toEqual(["step_1", "step_2"]);
    live = applyEvent(
      live,
      event(10, "approval.decided", { decision: "approved", actor: "ann", comment: "ok" }, "step_1"),
    );
    live = applyEvent(live, event(11, "step.ready", { status: "ready" }, "step_1"));
    expect(live.steps[0]!.waiting).toBeUndefined();
    expect(live.steps[0]!.decision).toMatchObject({ decision: "approved", actor: "ann", comment: "ok" });
    expect(waitingSteps(live).map((s) => s.stepId)).toEqual(["step_2"]);
  });

  it("shows a retry with its error, then clears it when the next attempt starts", () => {
    let live = fromSnapshot(snapshot());
    live = applyEvent(live, event(6, "step.running", { status: "running", attempt: 1 }, "step_1"));
    const retry = event(
      7,
      "step.retrying",
      { status: "ready", attempt: 1, error: "ECONNRESET", delayMs: 1000 },
      "step_1",
    );
    live = applyEvent(live, retry);
    expect(live.steps[0]).toMatchObject({
      status: "ready",
      retrying: {
        attempt: 1,
        error: "ECONNRESET",
        retryAt: new Date(Date.parse(retry.createdAt) + 1000).toISOString(),
      },
    });
    live = applyEvent(live, event(8, "step.running", { status: "running", attempt: 2 }, "step_1"));
    expect(live.steps[0]).toMatchObject({ status: "running", attempt: 2, progress: 0 });
    expect(live.steps[0]!.retrying).toBeUndefined();
  });

  it("clears the reason and finish time of a blocked step that returns to pending", () => {
    let live = fromSnapshot(snapshot());
    live = applyEvent(live, event(6, "step.blocked", { status: "blocked", reason: "Dependency failed" }, "step_2"));
    live = applyEvent(live, event(7, "step.pending", { status: "pending", reason: "" }, "step_2"));
    expect(live.steps[1]).toMatchObject({ status: "pending", reason: null, finishedAt: null });
  });

  it("a reopened run is no longer finished", () => {
    let live = fromSnapshot(snapshot());
    live = applyEvent(live, event(6, "run.failed", { status: "failed" }));
    live = applyEvent(live, event(7, "run.running", { status: "running", reason: "step_1 retried by ann" }));
    expect(live).toMatchObject({ status: "running", finishedAt: null, reason: "step_1 retried by ann" });
  });
});

describe("the shared event history", () => {
  it("costs no copy per event, and states derived twice from one predecessor do not share entries", () => {
    const base = fromSnapshot(snapshot());
    let live: LiveRun = applyEvent(base, event(6, "step.progress", { progress: 1 }, "step_1"));
    const shared = live.events;
    for (let seq = 7; seq < 2006; seq++)
      live = applyEvent(live, event(seq, "step.progress", { progress: 1 }, "step_1"));
    // Appended in place: one array for the whole history.
    expect(live.events).toBe(shared);
    const a = applyEvent(live, event(2006, "input.answered", { actor: "a" }));
    const b = applyEvent(
      live,
      event(2006, "run.plan_changed", { planVersion: 2, previousVersion: 1, insertedStepIds: [] }),
    );
    expect(liveEvents(a).at(-1)!.type).toBe("input.answered");
    expect(liveEvents(b).at(-1)!.type).toBe("run.plan_changed");
    expect(liveEvents(live)).toHaveLength(2000);
    expect(liveEvents(a, 3).map((e) => e.seq)).toEqual([2004, 2005, 2006]);
  });
});

describe("a change of the run's plan", () => {
  it("is applied in sequence and asks for a fresh snapshot", () => {
    const live = applyEvent(
      fromSnapshot(snapshot()),
      event(6, "run.plan_changed", { planVersion: 2, previousVersion: 1, insertedStepIds: ["step_3"] }, "step_1"),
    );
    expect(live.planChanged).toBe(true);
    expect(live.lastSeq).toBe(6);
  });
});

describe("a fan-out's instances", () => {
  it("ask for a fresh snapshot when a template makes them, and when an unknown instance moves", () => {
    const made = applyEvent(
      fromSnapshot(snapshot()),
      event(6, "step.running", { status: "running", instances: ["step_1[0]", "step_1[1]"] }, "step_1"),
    );
    expect(made.planChanged).toBe(true);
    const moved = applyEvent(
      fromSnapshot(snapshot()),
      event(6, "step.completed", { status: "completed", group: "step_1" }, "step_1[0]"),
    );
    expect(moved.planChanged).toBe(true);
    const ordinary = applyEvent(fromSnapshot(snapshot()), event(6, "step.running", { status: "running" }, "step_1"));
    expect(ordinary.planChanged).toBeUndefined();
  });
});
