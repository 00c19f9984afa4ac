import { z } from "zod";

/**
 * Seed 000's todo tools as MCP declares their parameters: the shape only. The SDK checks what is
 * declared and answers a mismatch in its own words; the seed's rules (non-empty titles, at most
 * 500 characters, one of title or status) are the operation's (server/operations/todo-plans.ts),
 * which answer with the problem object naming the rule. By operation name.
 */
const sessionId = {
  session_id: z.string().min(1).max(200).optional().describe("Key the plan by this id instead of the MCP session"),
};

export const TODO_TOOL_PARAMETERS: Record<string, z.ZodRawShape> = {
  "planning.setup_plan": {
    objective: z.string().describe("What the plan achieves"),
    initial_steps: z.array(z.string()).optional().describe("Step titles, in order"),
    ...sessionId,
  },
  "planning.add_step": { steps: z.array(z.string()).describe("Step titles, in order"), ...sessionId },
  "planning.update_step": {
    step_id: z.number().int().describe("The step's id"),
    title: z.string().optional(),
    status: z.enum(["pending", "in_progress", "done"]).optional(),
    ...sessionId,
  },
  "planning.read_plan": { ...sessionId },
};
