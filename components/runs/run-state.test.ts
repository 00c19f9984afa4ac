import { describe, expect, it } from "vitest";
import type { RunStepView, RunView } from "@/server/engine/run-view";
import type { StoredEvent } from "@/server/events/types";
import { applyEvent, fromSnapshot } from "./run-state";

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
  ...overrides,
});

const snapshot = (overrides: Partial<RunView> = {}): RunView => ({
  id: "run_1",
  planId: "plan_1",
  planVersion: 1,
  status: "running",
  traceId: "trace",
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
const event = (
  seq: number,
  type: string,
  data: Record<string, unknown> = {},
  stepId: string | null = null,
): StoredEvent => ({
  streamId: "run_1",
  seq,
  type,
  planId: "plan_1",
  runId: "run_1",
  stepId,
  traceId: "trace",
  data,
  createdAt: new Date(Date.UTC(2024, 0, 1, 0, 1, clock++)).toISOString(),
});

describe("fromSnapshot", () => {
  it("copies the snapshot and starts with no events", () => {
    const snap = snapshot();
    const live = fromSnapshot(snap);
    expect(live).toEqual({ ...snap, events: [] });
    expect(live).not.toBe(snap);
  });
});

describe("applyEvent", () => {
  it("ignores events at or below lastSeq, returning the same object", () => {
    const live = fromSnapshot(snapshot({ lastSeq: 5 }));
    for (const seq of [1, 4, 5]) {
      const after = applyEvent(live, event(seq, "step.running", { status: "running", attempt: 1 }, "step_1"));
      expect(after).toBe(live);
    }
    expect(live.steps[0]!.status).toBe("pending");
    expect(live.events).toEqual([]);
  });

  it("advances lastSeq and records the event", () => {
    const live = fromSnapshot(snapshot());
    const e = event(6, "step.log", { lines: ["hi"] }, "step_1");
    const after = applyEvent(live, e);
    expect(after.lastSeq).toBe(6);
    expect(after.events).toEqual([e]);
    // The replayed event is now old.
    expect(applyEvent(after, e)).toBe(after);
  });

  it("applies step status, attempt and start time without touching other steps or the input", () => {
    const live = fromSnapshot(snapshot());
    const e = event(6, "step.running", { status: "running", attempt: 2 }, "step_1");
    const after = applyEvent(live, e);
    expect(after.steps[0]).toMatchObject({ status: "running", attempt: 2, startedAt: e.createdAt, finishedAt: null });
    expect(after.steps[1]).toBe(live.steps[1]);
    expect(live.steps[0]).toEqual(stepView("step_1"));
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
    expect(live.events.map((e) => e.seq)).toEqual([6, 7, 8]);
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
    expect(after.steps).toEqual(live.steps);
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

  it.each(["failed", "cancelled"])("run.%s also finishes the run", (status) => {
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
    const after = applyEvent(fromSnapshot(snapshot()), event(6, "approval.requested", { status: "completed" }));
    expect(after.status).toBe("running");
    expect(after.lastSeq).toBe(6);
  });
});
