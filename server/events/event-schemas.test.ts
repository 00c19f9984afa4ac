import { describe, expect, it } from "vitest";
import { z } from "zod";
import { eventSchema, type EventType } from "./event-schemas";
import { appendEvents } from "./store";
import type { NewEvent } from "./types";

const at = "2026-01-01T00:00:00.000Z";
const result = { ok: true, value: { text: "hi" }, duration: 12, timestamp: at };

/**
 * One event of every type as the engine, planner and agents write them (copied from recorded
 * streams), so a schema that no longer accepts what the server writes fails here too.
 */
const representative: NewEvent[] = [
  { type: "plan.created", data: { version: 1, goal: "Read then echo", source: "manual" } },
  { type: "plan.step", stepId: "step_1", data: { step: { id: "step_1", tool: "echo", state: "queued" } } },
  { type: "plan.updated", data: { version: 2, baseVersion: 1, changeNote: "Edited step_2" } },
  {
    type: "run.started",
    data: {
      status: "running",
      planVersion: 1,
      approvedBy: "local",
      steps: [
        { id: "step_1", status: "pending" },
        { id: "step_2", status: "skipped" },
      ],
    },
  },
  { type: "run.running", data: { status: "running", reason: "New work in version 3" } },
  { type: "run.paused", data: { status: "paused", actor: "local" } },
  { type: "run.resumed", data: { status: "running", actor: "local", reason: "Signals cleared" } },
  { type: "run.failing", data: { status: "failing", reason: "Critical step step_1 failed" } },
  { type: "run.completed", data: { status: "completed" } },
  { type: "run.failed", data: { status: "failed", reason: "A critical step failed" } },
  { type: "run.cancelled", data: { status: "cancelled", actor: "local" } },
  {
    type: "run.plan_changed",
    stepId: "step_2",
    data: { planVersion: 2, previousVersion: 1, insertedStepIds: ["step_3"] },
  },
  { type: "step.pending", stepId: "step_1", data: { status: "pending", reason: "" } },
  { type: "step.blocked", stepId: "step_1", data: { status: "blocked", reason: "Dependency step_0 failed" } },
  { type: "step.ready", stepId: "step_1", data: { status: "ready" } },
  { type: "step.running", stepId: "step_1", data: { status: "running", attempt: 1, worker: "host · pid 1" } },
  { type: "step.awaiting_approval", stepId: "step_1", data: { status: "awaiting_approval", expiresAt: at } },
  { type: "step.awaiting_input", stepId: "step_1", data: { status: "awaiting_input", attempt: 1 } },
  { type: "step.awaiting_agent", stepId: "step_1", data: { status: "awaiting_agent", agent: "claude" } },
  { type: "step.completed", stepId: "step_1", data: { status: "completed", attempt: 1, result } },
  {
    type: "step.failed",
    stepId: "step_1",
    data: {
      status: "failed",
      reason: "boom",
      attempt: 3,
      result: { ok: false, error: "boom", duration: 1, timestamp: at },
    },
  },
  {
    type: "step.skipped",
    stepId: "step_1",
    data: { status: "skipped", reason: "Skipped by local", agent: "a", note: "n" },
  },
  { type: "step.cancelled", stepId: "step_1", data: { status: "cancelled", reason: "Run cancelled" } },
  { type: "step.retrying", stepId: "step_1", data: { status: "ready", attempt: 1, error: "flaky", delayMs: 500 } },
  {
    type: "step.interrupted",
    stepId: "step_1",
    data: { attempt: 1, idempotent: true, effectsStarted: false, reason: "Interrupted before it started" },
  },
  { type: "step.progress", stepId: "step_1", data: { progress: 40, message: "copying" } },
  { type: "step.log", stepId: "step_1", data: { lines: [{ message: "hello", level: "info", at }] } },
  { type: "approval.requested", stepId: "step_1", data: { planVersion: 1, expiresAt: at } },
  { type: "approval.expiring", stepId: "step_1", data: { expiresAt: at } },
  { type: "approval.decided", stepId: "step_1", data: { decision: "approved", actor: "local", comment: null } },
  { type: "input.requested", stepId: "step_1", data: { question: "Which?", choices: ["a", "b"] } },
  { type: "input.answered", stepId: "step_1", data: { actor: "local" } },
  { type: "child_run.started", stepId: "step_2", data: { childRunId: "run-2", planId: "plan-2", version: 1 } },
  {
    type: "signal.raised",
    stepId: "step_1",
    data: { id: "tests", level: "blocker", message: "red", raisedBy: "stepwise" },
  },
  { type: "signal.cleared", stepId: null, data: { id: "tests", clearedBy: "agent" } },
  {
    type: "agent.task_leased",
    stepId: "step_2",
    data: {
      agent: "ada",
      expiresAt: "2026-11-25T19:00:00.000Z",
      brief: { task_id: 2, title: "Part 2", goal: "Ship", working_directory: "/ws", assignee: "ada" },
    },
  },
  {
    type: "agent.lease_expired",
    stepId: "step_2",
    data: { agent: "ada", leasedAt: "2026-11-25T18:50:00.000Z", reason: "Lease of ada expired, returned to ready" },
  },
  { type: "agent.concurrency_set", stepId: null, data: { agentConcurrency: 1, actor: "alice" } },
  {
    type: "task.verified",
    stepId: "step_2",
    data: {
      passed: false,
      agent: "agent-7",
      results: [{ command: "npm test", passed: false, exitCode: 1, tail: "1 failed", level: "major", durationMs: 900 }],
    },
  },
  { type: "task.reported", stepId: "step_2", data: { agent: "agent-7" } },
  { type: "task.report_ended", stepId: "step_2", data: { outcome: "dropped", reason: "the reporter was refused" } },
  {
    type: "task.merged",
    stepId: "step_2",
    data: { commit: "0123abc", branch: "stepwise/0123abcd/integration", fastForward: false },
  },
  {
    type: "task.merge_conflict",
    stepId: "step_3",
    data: { files: ["src/shared.txt"], branch: "stepwise/0123abcd/integration" },
  },
  { type: "planning.started", data: { kind: "create", mode: "quick", model: "m", goal: "g", judge: false } },
  { type: "planning.context", data: { message: "Workspace snapshot: 3 entries", entries: 3, keyFiles: ["README.md"] } },
  { type: "planning.draft", data: { attempt: 0, steps: 2, summary: null } },
  { type: "planning.gates_failed", data: { attempt: 0, details: ["Unknown tool: x"] } },
  { type: "planning.gates_passed", data: { attempt: 1 } },
  { type: "planning.judge", data: { attempt: 1, approved: true, feedback: "fine" } },
  { type: "planning.refining", data: { attempt: 1 } },
  { type: "planning.unparsable", data: { attempt: 0, reason: "not JSON" } },
  { type: "planning.nudge", data: { turn: 2, text: "thinking" } },
  { type: "planning.tool_call", data: { turn: 1, tool: "read_file", args: { path: "README.md" } } },
  {
    type: "planning.usage",
    data: {
      purpose: "plan",
      model: "m",
      inputTokens: 10,
      outputTokens: 5,
      costUsd: null,
      durationMs: 120,
      spanId: "abc",
      ok: true,
    },
  },
  { type: "planning.question", data: { questionId: "q1", question: "Which database?" } },
  { type: "planning.answered", data: { questionId: "q1", answer: "Postgres", by: "local" } },
  { type: "planning.cancelled", data: { by: "local" } },
  { type: "planning.message", data: { messageId: "m1", message: "Mention the licence", by: "local" } },
  { type: "planning.timed_out", data: { questionId: "q1", timeoutMs: 1_800_000, message: "Nobody answered" } },
  { type: "planning.resumed", data: { phase: "gathering" } },
  { type: "planning.completed", data: { planId: "p1", version: 1 } },
  { type: "planning.invalid", data: { details: [{ code: "cycle" }] } },
  {
    type: "planning.failed",
    data: {
      status: "error",
      error_type: "provider_error",
      message: "rate limited",
      kind: "rate_limit",
      retryable: true,
    },
  },
];

/** Every type the union admits (a member may cover several, like `step.<status>`). */
const unionTypes = eventSchema.options.flatMap((option) => {
  const type = option.shape.type;
  return type instanceof z.ZodLiteral ? [...type.values] : type.options;
}) as EventType[];

/** A client that records what reaches the database. */
function recordingClient() {
  const queries: string[] = [];
  return {
    queries,
    client: {
      query: async (text: string) => {
        queries.push(text);
        return { rows: [{ last_seq: 1, created_at: at }] };
      },
    } as unknown as Parameters<typeof appendEvents>[0],
  };
}
const stream = { streamId: "s", planId: "p", runId: null, traceId: "t" };

describe("event schemas", () => {
  it("parse one recorded event of every type in the union", () => {
    expect(new Set(representative.map((event) => event.type))).toEqual(new Set(unionTypes));
    for (const event of representative) {
      const parsed = eventSchema.safeParse(event);
      expect(parsed.error, event.type).toBeUndefined();
    }
  });

  it("reject an unknown type and data that does not fit its type", () => {
    expect(eventSchema.safeParse({ type: "step.exploded", data: {} }).success).toBe(false);
    expect(eventSchema.safeParse({ type: "step.progress", data: { progress: "half" } }).success).toBe(false);
    expect(eventSchema.safeParse({ type: "step.running", data: { status: "exploded" } }).success).toBe(false);
    expect(eventSchema.safeParse({ type: "approval.decided", data: { decision: "maybe", actor: "x" } }).success).toBe(
      false,
    );
  });
});

describe("appendEvents outside production", () => {
  it("appends a valid event", async () => {
    const { client, queries } = recordingClient();
    const [stored] = await appendEvents(client, stream, [representative[0]!]);
    expect(stored).toMatchObject({ seq: 1, type: "plan.created", stepId: null });
    expect(queries.length).toBeGreaterThan(0);
  });

  it("refuses an unknown type or bad data before anything reaches the database", async () => {
    const bad = [
      { type: "step.exploded", data: {} },
      { type: "step.progress", stepId: "step_1", data: { progress: "half" } },
      { type: "run.started", data: { status: "running" } },
    ] as unknown as NewEvent[];
    for (const event of bad) {
      const { client, queries } = recordingClient();
      await expect(appendEvents(client, stream, [representative[0]!, event])).rejects.toThrow(
        /does not match its schema/,
      );
      expect(queries).toEqual([]);
    }
  });
});
