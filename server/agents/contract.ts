import { z } from "zod";
import { SIGNAL_LEVELS } from "./signal-store";

/**
 * Seed 003's agent contract (Part 2, "API Contract"), as zod schemas: what `start`, `status`,
 * `update`, `alert` and `suggest` send and answer. The operations layer validates against these,
 * the CLI prints exactly these objects with `--json`, and the tests check every answer with them.
 * Where the seed leaves a case open (work the agent must wait for; a finished session) the
 * additions are marked and described in the agent instructions the session syncs.
 */

export const TASK_TYPES = ["feature", "bugfix", "chore", "test", "docs", "refactor", "research", "ops"] as const;
export const SEED_TASK_STATUSES = ["TODO", "IN_PROGRESS", "DONE", "CANCELLED"] as const;

export const sessionCreatedSchema = z.object({
  status: z.literal("session_created"),
  session_id: z.string(),
  message: z.string(),
  next_command: z.string(),
  /**
   * Addition: the session's plan waits for a person other than its author (the agent) to approve
   * it, as the workspace's approver policy says; `status` answers `waiting` until then.
   */
  awaiting_approval: z.object({ plan_id: z.string(), author: z.string() }).optional(),
});

export const taskSchema = z.object({
  id: z.number().int(),
  title: z.string(),
  type: z.string().optional(),
  status: z.enum(SEED_TASK_STATUSES),
  dependencies: z.array(z.number().int()),
  context_hints: z.array(z.string()),
  relevant_file_paths: z.array(z.string()),
  /** Addition: the agent the task is leased to while one holds it (several agents, one plan). */
  assignee: z.string().optional(),
  /** Addition: who carries the task out — the agent, or Stepwise running a tool (tests, builds). */
  executor: z.enum(["agent", "stepwise"]),
  /** Addition: Stepwise's own step state, finer than the seed's four (awaiting_approval, failed…). */
  state: z.string(),
  /** Addition: what "done" means for the task, and the commands Stepwise runs to check it. */
  acceptance: z.array(z.string()).optional(),
  verify: z.array(z.string()).optional(),
  /**
   * Addition, on the current task: where to work — the task's own git worktree (on its own branch,
   * from its dependencies' merged results) when the workspace is a git repository.
   */
  working_directory: z.string().optional(),
  /** Addition: the findings of the task's last failed verification, to fix before DONE again. */
  findings: z.string().optional(),
  /** Addition: what the agent should do beyond the title (the agent task's `instructions`). */
  instructions: z.string().optional(),
  /**
   * Addition, fan-out: a task with `for_each` runs once per element of that list, each element an
   * instance of its own (`id` and `instance`, the element's index; `$item` in its instructions is
   * `item`). Report on instances, never on the task that groups them.
   */
  for_each: z.string().optional(),
  instance: z.number().int().nonnegative().optional(),
  item: z.unknown().optional(),
});
export type AgentTaskView = z.infer<typeof taskSchema>;

const sessionRef = z.object({ id: z.string(), goal: z.string().optional() });
const signalSchema = z.object({
  id: z.string(),
  task_id: z.number().int().nullable(),
  level: z.enum(SIGNAL_LEVELS),
  message: z.string(),
});

/** Response A: the first call in a session. */
export const syncInstructionsSchema = z.object({
  now: z.object({
    reason: z.literal("sync_instructions"),
    agent_instructions: z.string(),
    instructions_content: z.string(),
  }),
  session: sessionRef,
});

/**
 * Addition: what the people who approved said — the note given with the plan's approval, and notes
 * given with decisions on its gated steps — so an agent in a fresh context still follows them.
 */
export const approverNoteSchema = z.object({
  /** `plan`, or the step id whose gate the note was given with. */
  about: z.string(),
  by: z.string(),
  note: z.string(),
});
export type ApproverNote = z.infer<typeof approverNoteSchema>;

/**
 * Addition: everything an agent needs for its task, self-contained — so any of several agents, in
 * a fresh context, can do it. Built once when the task is handed out and stored with the lease
 * (and in the run's `agent.task_leased` event): what the agent was given is what people see.
 */
export const taskBriefSchema = z.object({
  task_id: z.number().int(),
  /** A fan-out instance's index and element (see `taskSchema`). */
  instance: z.number().int().nonnegative().optional(),
  item: z.unknown().optional(),
  instructions: z.string().optional(),
  title: z.string(),
  type: z.string().optional(),
  description: z.string().optional(),
  goal: z.string(),
  context_hints: z.array(z.string()),
  relevant_file_paths: z.array(z.string()),
  acceptance: z.array(z.string()),
  /** The DONE notes of the tasks this one depends on. */
  dependency_notes: z.array(z.object({ task_id: z.number().int(), title: z.string(), notes: z.string().nullable() })),
  approver_notes: z.array(approverNoteSchema),
  /** Where to do the work: the task's own git worktree, or the workspace (server/agents/task-working-directory.ts). */
  working_directory: z.string(),
  /** The agent the task is leased to, and until when (the server's clock; any call renews it). */
  assignee: z.string(),
  lease_expires_at: z.string(),
});
export type TaskBrief = z.infer<typeof taskBriefSchema>;

/** Response B: the next task, with its hints. */
export const readyForTaskSchema = z.object({
  now: z.object({
    reason: z.literal("ready_for_task"),
    agent_instructions: z.string(),
    current_task: taskSchema,
    approver_notes: z.array(approverNoteSchema).optional(),
    /** Addition: the task's self-contained brief, as handed out under the lease. */
    brief: taskBriefSchema.optional(),
  }),
  plan: z.object({ tasks: z.array(taskSchema) }),
  session: sessionRef,
});

/** Response C: a blocker signal holds the session. */
export const waitingOnSignalSchema = z.object({
  now: z.object({
    reason: z.literal("waiting_on_signal"),
    agent_instructions: z.string(),
    message: z.string(),
  }),
  signal: signalSchema,
  session: sessionRef,
});

/** Response D: every task is settled; the agent gives its final summary (once). */
export const planCompletedSchema = z.object({
  now: z.object({
    reason: z.literal("plan_completed"),
    agent_instructions: z.string(),
    message: z.string(),
  }),
  session: sessionRef.extend({ final_summary: z.string().optional() }),
});

/**
 * Addition: nothing is the agent's to do right now — Stepwise is running a tool step (the tests
 * after a code task) or a person has to approve one. The agent asks again after `retry_after_seconds`.
 */
export const waitingSchema = z.object({
  now: z.object({
    reason: z.literal("waiting"),
    agent_instructions: z.string(),
    message: z.string(),
    retry_after_seconds: z.number().int(),
    waiting_for: z.array(z.object({ task_id: z.number().int().nullable(), title: z.string(), state: z.string() })),
  }),
  session: sessionRef,
});

export const statusResponseSchema = z.union([
  syncInstructionsSchema,
  readyForTaskSchema,
  waitingOnSignalSchema,
  planCompletedSchema,
  waitingSchema,
]);
export type StatusResponse = z.infer<typeof statusResponseSchema>;

/**
 * `update`'s payload. Task fields are checked by the quality gates, not here, so a task missing its
 * hints comes back as `plan_validation_failed` with an actionable detail rather than a parse error.
 */
export const newTaskSchema = z.object({
  title: z.string().max(200).optional(),
  type: z.string().max(40).optional(),
  description: z.string().max(10_000).optional(),
  dependencies: z.array(z.number().int().positive()).max(200).default([]),
  context_hints: z.array(z.string().max(2_000)).max(50).optional(),
  relevant_file_paths: z.array(z.string().max(1_000)).max(100).optional(),
  /** Addition: acceptance criteria — what "done" means, in words. */
  acceptance: z.array(z.string().max(2_000)).max(50).optional(),
  /** Addition: shell commands Stepwise runs in the task's worktree when it is reported DONE. */
  verify: z.array(z.string().max(2_000)).max(10).optional(),
});
export type NewTask = z.infer<typeof newTaskSchema>;

export const updatePayloadSchema = z
  .object({
    add_tasks: z.array(newTaskSchema).max(200).optional(),
    update_tasks: z
      .array(
        z
          .object({
            id: z.number().int().positive(),
            /** Addition: which instance of a fan-out task (its index); status changes only. */
            instance: z.number().int().nonnegative().optional(),
            status: z.enum(SEED_TASK_STATUSES).optional(),
            /** Addition: what the agent did, or why it hands the task back. */
            notes: z.string().max(10_000).optional(),
            /** Addition, with DONE: a list the task found (failing test files), which a later task's `for_each` reads. */
            items: z.array(z.unknown()).max(1_000).optional(),
            // Any other field of the task (seed 003): checked by the same gates as an added task.
            ...newTaskSchema.omit({ dependencies: true }).shape,
            dependencies: z.array(z.number().int().positive()).max(200).optional(),
          })
          .refine((update) => Object.keys(update).some((key) => !["id", "instance", "notes"].includes(key)), {
            message: "An update_tasks item needs a status or a field of the task to change (notes go with a status)",
          }),
      )
      .max(200)
      .optional(),
    final_summary: z.string().trim().min(1).max(20_000).optional(),
  })
  .refine((payload) => payload.add_tasks || payload.update_tasks || payload.final_summary, {
    message: "Give at least one of add_tasks, update_tasks or final_summary",
  });
export type UpdatePayload = z.infer<typeof updatePayloadSchema>;

export const successSchema = z.object({ status: z.literal("success"), message: z.string() });

export const planValidationFailedSchema = z.object({
  status: z.literal("error"),
  error_type: z.literal("plan_validation_failed"),
  message: z.string(),
  details: z.array(z.string()).min(1),
});

export const updateResponseSchema = z.union([successSchema, planValidationFailedSchema]);
export type UpdateResponse = z.infer<typeof updateResponseSchema>;

export const alertInputSchema = z.union([
  z.object({
    id: z
      .string()
      .trim()
      .min(1)
      .max(100)
      .regex(/^[\w.:-]+$/, "Use letters, digits, _ . : - in signal ids"),
    level: z.enum(SIGNAL_LEVELS).default("blocker"),
    message: z.string().trim().min(1).max(5_000),
    task_id: z.number().int().positive().optional(),
  }),
  z.object({ clear: z.string().trim().min(1).max(100) }),
]);

export const suggestResponseSchema = z.object({
  status: z.literal("success"),
  suggestions: z.array(
    z.object({
      title: z.string(),
      type: z.string(),
      context_hints: z.array(z.string()),
      relevant_file_paths: z.array(z.string()),
      reason: z.string(),
    }),
  ),
});
