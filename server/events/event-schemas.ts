import { z } from "zod";
import {
  identityKindSchema,
  PLAN_SOURCES,
  RUN_STATUSES,
  STEP_STATUSES,
  stepResultSchema,
  type SignalLevel,
} from "../vocabulary";

/**
 * Every event Stepwise appends, defined once: a discriminated union on `type`, each member with the
 * schema of its `data`. The server appends only these (`appendEvents` takes `NewEvent`, so a
 * misspelt type or wrong data is a compile error, and under test the schema checks each
 * event at append); the UI narrows on `type` and reads `data` with the inferred types (it may
 * import only types from server/, which is all it needs).
 *
 * Adding an event: add one member below (`event("area.what", z.object({...}))`), in its stream's
 * section. The wire format is `{ type, stepId, data }` inside the stored envelope (types.ts); a
 * member only describes it, so existing events and the SSE/JSON APIs do not change. Keep data
 * additive: readers (the UI, stored history) may see events written before a field existed.
 */

const event = <const T extends string, D extends z.ZodType>(type: T, data: D) =>
  z.object({ type: z.literal(type), data });

/** `step.<status>`: a step changed status (`RunTransaction.setStatus`). */
export const STEP_STATUS_EVENT_TYPES = STEP_STATUSES.map((status) => `step.${status}` as const);

/** What a step status event carries besides the status; each status sets the fields that apply. */
export const stepStatusDataSchema = z.object({
  status: z.enum(STEP_STATUSES),
  /** Why; an empty reason clears the step's earlier one (a blocked step returning to pending). */
  reason: z.string().optional(),
  attempt: z.number().int().optional(),
  result: stepResultSchema.optional(),
  /** awaiting_approval: when the gate expires. */
  expiresAt: z.string().optional(),
  /** running (a worker's claim): the worker's name. */
  worker: z.string().optional(),
  /** An agent task: the agent that moved it, and its note. */
  agent: z.string().optional(),
  note: z.string().optional(),
  /** A fan-out instance's events: the template step whose group it belongs to. */
  group: z.string().optional(),
  /** A fan-out template starting its group: the instances made, in list order. */
  instances: z.array(z.string()).optional(),
});

const runStatusData = z.object({
  status: z.enum(RUN_STATUSES),
  reason: z.string().optional(),
  actor: z.string().optional(),
});

const signalLevel = z.enum(["info", "warning", "blocker"] satisfies SignalLevel[]);

export const eventSchema = z.discriminatedUnion("type", [
  // ── A plan's stream (stream id = plan id) ──
  event("plan.created", z.object({ version: z.number().int(), goal: z.string(), source: z.enum(PLAN_SOURCES) })),
  /** Seed 001: a new plan announces each step as queued. */
  event("plan.step", z.object({ step: z.record(z.string(), z.unknown()) })),
  event("plan.updated", z.object({ version: z.number().int(), baseVersion: z.number().int(), changeNote: z.string() })),

  // ── A run's stream (stream id = run id) ──
  event(
    "run.started",
    z.object({
      status: z.literal("running"),
      planVersion: z.number().int(),
      approvedBy: z.string(),
      rerunOf: z.string().optional(),
      steps: z.array(z.object({ id: z.string(), status: z.enum(STEP_STATUSES) })),
    }),
  ),
  z.object({
    type: z.enum([
      "run.running",
      "run.paused",
      "run.resumed",
      "run.failing",
      "run.completed",
      "run.failed",
      "run.cancelled",
    ]),
    data: runStatusData,
  }),
  /** The run moved to a new plan version (recovery, an agent's or a person's edit). */
  event(
    "run.plan_changed",
    z.object({
      planVersion: z.number().int(),
      previousVersion: z.number().int(),
      insertedStepIds: z.array(z.string()),
    }),
  ),
  z.object({ type: z.enum(STEP_STATUS_EVENT_TYPES), data: stepStatusDataSchema }),
  event(
    "step.retrying",
    z.object({
      status: z.literal("ready"),
      attempt: z.number().int(),
      error: z.string(),
      delayMs: z.number(),
      /** The attempt could not reach the database before its command started: it is made again, uncounted. */
      waitingForDatabase: z.boolean().optional(),
      /** A gentle stop ended the attempt with its processes gone: it is made again, uncounted. */
      interrupted: z.boolean().optional(),
    }),
  ),
  event(
    "step.interrupted",
    z.object({ attempt: z.number().int(), idempotent: z.boolean(), effectsStarted: z.boolean(), reason: z.string() }),
  ),
  event("step.progress", z.object({ progress: z.number(), message: z.string().optional() })),
  event("step.log", z.object({ lines: z.array(z.object({ message: z.string(), level: z.string(), at: z.string() })) })),
  event(
    "approval.requested",
    // reason: why a step that was not gated still waits (the worker could not confine it).
    z.object({ planVersion: z.number().int(), expiresAt: z.string(), reason: z.string().optional() }),
  ),
  event("approval.expiring", z.object({ expiresAt: z.string() })),
  event(
    "approval.decided",
    z.object({
      decision: z.enum(["approved", "denied"]),
      actor: z.string(),
      /** person, agent or system: who decided, by kind (absent in events from before kinds). */
      actorKind: identityKindSchema.optional(),
      comment: z.string().nullable(),
      /** Under an approver policy asking for more than one: distinct approvals so far, and how many it asks. */
      approvals: z.number().optional(),
      required: z.number().optional(),
    }),
  ),
  event("input.requested", z.object({ question: z.string(), choices: z.array(z.string()).optional() })),
  event("input.answered", z.object({ actor: z.string() })),
  /** A `run_plan` step started its child run (server/engine/child-runs.ts). */
  event("child_run.started", z.object({ childRunId: z.string(), planId: z.string(), version: z.number().int() })),
  /** Signals of an agent session travel in its run's stream. */
  event("signal.raised", z.object({ id: z.string(), level: signalLevel, message: z.string(), raisedBy: z.string() })),
  event("signal.cleared", z.object({ id: z.string(), clearedBy: z.string() })),
  /** An agent of the session was handed the task under a lease; `brief` is exactly what it was given. */
  event(
    "agent.task_leased",
    z.object({ agent: z.string(), expiresAt: z.string(), brief: z.record(z.string(), z.unknown()) }),
  ),
  /** The agent stopped calling: its lease ran out and the task is ready for another agent. */
  event("agent.lease_expired", z.object({ agent: z.string(), leasedAt: z.string(), reason: z.string() })),
  /** A person changed how many agent tasks may be in progress at once. */
  event("agent.concurrency_set", z.object({ agentConcurrency: z.number().int(), actor: z.string() })),
  /**
   * The agent reported the task DONE; Stepwise commits, checks and merges it off the agent's call
   * (server/agents/task-reports.ts). The task stays running until the outcome is recorded.
   */
  event("task.reported", z.object({ agent: z.string() })),
  /** That report is over: its outcome recorded (DONE, back to TODO, a conflict), or dropped (`reason`). */
  event("task.report_ended", z.object({ outcome: z.enum(["recorded", "dropped"]), reason: z.string().optional() })),
  /** An agent task's verifiers ran in its worktree (server/agents/verifiers.ts). */
  event(
    "task.verified",
    z.object({
      passed: z.boolean(),
      agent: z.string(),
      results: z.array(
        z.object({
          command: z.string(),
          passed: z.boolean(),
          exitCode: z.number().nullable(),
          tail: z.string(),
          level: z.enum(["critical", "major", "minor"]).optional(),
          error: z.string().optional(),
          durationMs: z.number(),
        }),
      ),
    }),
  ),
  /** An agent task's branch merged into the run's integration branch (server/agents/worktrees.ts). */
  event("task.merged", z.object({ commit: z.string(), branch: z.string(), fastForward: z.boolean() })),
  /** It did not merge: the merge was aborted; a blocker signal names the files. */
  event("task.merge_conflict", z.object({ files: z.array(z.string()), branch: z.string() })),

  // ── A planning session's stream (stream id = session id) ──
  event(
    "planning.started",
    z.object({
      kind: z.string(),
      mode: z.string(),
      model: z.string(),
      goal: z.string().optional(),
      judge: z.boolean().optional(),
      /** An agent's plan mode: why it plans. */
      reason: z.string().optional(),
    }),
  ),
  event(
    "planning.context",
    z.object({ message: z.string(), entries: z.number().int(), keyFiles: z.array(z.string()) }),
  ),
  event(
    "planning.draft",
    z.object({ attempt: z.number().int(), steps: z.number().int(), summary: z.string().nullable() }),
  ),
  event("planning.gates_failed", z.object({ attempt: z.number().int(), details: z.array(z.string()) })),
  event("planning.gates_passed", z.object({ attempt: z.number().int() })),
  event("planning.judge", z.object({ attempt: z.number().int(), approved: z.boolean(), feedback: z.string() })),
  event("planning.refining", z.object({ attempt: z.number().int() })),
  event("planning.unparsable", z.object({ attempt: z.number().int(), reason: z.string() })),
  event("planning.nudge", z.object({ turn: z.number().int(), text: z.string() })),
  event(
    "planning.tool_call",
    z.object({
      turn: z.number().int(),
      tool: z.string(),
      args: z.record(z.string(), z.unknown()).optional(),
      error: z.string().optional(),
    }),
  ),
  event(
    "planning.usage",
    z.object({
      purpose: z.string(),
      model: z.string(),
      inputTokens: z.number(),
      outputTokens: z.number(),
      costUsd: z.number().nullable(),
      durationMs: z.number(),
      spanId: z.string(),
      ok: z.boolean(),
    }),
  ),
  event("planning.question", z.object({ questionId: z.string(), question: z.string() })),
  event("planning.answered", z.object({ questionId: z.string(), answer: z.string(), by: z.string() })),
  event("planning.cancelled", z.object({ by: z.string().optional() })),
  /** A person's message joined the planning context (server/planner/messages.ts). */
  event("planning.message", z.object({ messageId: z.string(), message: z.string(), by: z.string() })),
  /** Nobody answered the question in time (STEPWISE_PLANNER_ANSWER_TIMEOUT_MS): the session is cancelled. */
  event("planning.timed_out", z.object({ questionId: z.string(), timeoutMs: z.number().int(), message: z.string() })),
  /** A worker picked the session's loop up again (after an answer or a restart) at this phase. */
  event("planning.resumed", z.object({ phase: z.string() })),
  event("planning.completed", z.object({ planId: z.string(), version: z.number().int() })),
  event("planning.invalid", z.object({ details: z.array(z.unknown()) })),
  /** The session's failure (planner/sessions.ts SessionFailure): always a message, more by kind. */
  event("planning.failed", z.looseObject({ error_type: z.string(), message: z.string() })),
]);

/** One event as appended: its type and data (the store adds the envelope). */
export type EventBody = z.infer<typeof eventSchema>;

/** Where an event was stored: the envelope around its `{ type, data }` (`EventEnvelope` in types.ts). */
export const eventEnvelopeSchema = z.object({
  streamId: z.string(),
  /** Gap-free, strictly increasing within its stream. */
  seq: z.number(),
  planId: z.string(),
  runId: z.string().nullable(),
  stepId: z.string().nullable(),
  traceId: z.string(),
  createdAt: z.string(),
});

/** A stored event as the doors answer it: its envelope and one member of the union (`StoredEvent`). */
export const storedEventSchema = z.intersection(eventEnvelopeSchema, eventSchema);
export type EventType = EventBody["type"];
/** The data of events of type `T` (a member may cover several types, e.g. `step.<status>`). */
export type EventData<T extends EventType> = EventBody extends infer E
  ? E extends { type: infer U; data: infer D }
    ? T extends U
      ? D
      : never
    : never
  : never;
export type StepStatusData = z.infer<typeof stepStatusDataSchema>;
