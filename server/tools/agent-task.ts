import { z } from "zod";
import { sandboxAvailable } from "./sandbox";
import { isReadOnlyCommand } from "./shell-read-only";
import { defineTool } from "./types";

export const AGENT_TASK_TOOL = "agent_task";

/** Verifier commands a task may carry, and how long each may be. */
export const MAX_VERIFIERS = 10;

export const agentTaskInputSchema = z.object({
  /** What the agent should do beyond the step's title and description, if anything. */
  instructions: z.string().max(10_000).optional(),
  /** What "done" means for this task, in words: shown to the agent and to reviewers. */
  acceptance: z.array(z.string().trim().min(1).max(2_000)).max(20).optional(),
  /**
   * Shell commands (`npm test -- path`) Stepwise runs in the task's worktree when the agent
   * reports DONE; every one must exit 0 for the task to complete and merge. See
   * `server/agents/verifiers.ts`.
   */
  verify: z
    .array(
      z
        .string()
        .min(1)
        .max(2_000)
        .refine((command) => command.trim().length > 0, "A verifier command is empty"),
    )
    .max(MAX_VERIFIERS)
    .optional(),
});
export type AgentTaskArgs = z.infer<typeof agentTaskInputSchema>;

/** The task's verifier commands, from its (unvalidated) arguments. */
export function verifierCommands(args: unknown): string[] {
  const verify = (args as { verify?: unknown } | null | undefined)?.verify;
  return Array.isArray(verify) ? verify.filter((command): command is string => typeof command === "string") : [];
}

/**
 * Whether Stepwise may run this verifier without a person's approval: exactly when a shell step
 * with this command could (read-only by the shell analysis, and a sandbox to hold it to that).
 */
export function verifierRunsUnapproved(command: string): boolean {
  return isReadOnlyCommand(command) && sandboxAvailable();
}

/**
 * Work an agent does itself (seed 003's tasks): writing code, reviewing, deciding. The engine never
 * executes it. When its dependencies are satisfied (and its gate approved) the step waits in
 * `awaiting_agent`; an agent's `status` hands it out, and its `update` (IN_PROGRESS, DONE, TODO,
 * CANCELLED) moves it through the state machine — see `server/agents/`.
 */
export const agentTaskTool = defineTool({
  name: AGENT_TASK_TOOL,
  description:
    "A task an agent performs itself (write code, review, decide); the agent reports progress and completion. " +
    "Optional acceptance criteria (text) and verify commands, run in the task's worktree when it is reported DONE.",
  inputSchema: agentTaskInputSchema,
  /** Recorded when the agent reports DONE (`server/engine/agent-tasks.ts`): who, and their note. */
  outputSchema: z.object({
    doneBy: z.string(),
    note: z.string().optional(),
    /** A list the task found (the failing test files), reported with DONE: what a later step's `forEach` reads. */
    items: z.array(z.unknown()).optional(),
  }),
  capability: "agent.work",
  capabilityLabel: "Agent task",
  readOnly: false,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  // Verifiers are shell commands Stepwise runs: one a shell step would gate gates the task.
  requiresApprovalFor(input) {
    return verifierCommands(input).some((command) => !verifierRunsUnapproved(command));
  },
  defaultTimeoutSeconds: 86_400,
  async execute() {
    throw new Error("agent_task is carried out by an agent through its session, not executed by a worker");
  },
});
