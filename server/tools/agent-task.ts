import { z } from "zod";
import { defineTool } from "./types";

export const AGENT_TASK_TOOL = "agent_task";

export const agentTaskInputSchema = z.object({
  /** What the agent should do beyond the step's title and description, if anything. */
  instructions: z.string().max(10_000).optional(),
});

/**
 * Work an agent does itself (seed 003's tasks): writing code, reviewing, deciding. The engine never
 * executes it. When its dependencies are satisfied (and its gate approved) the step waits in
 * `awaiting_agent`; an agent's `status` hands it out, and its `update` (IN_PROGRESS, DONE, TODO,
 * CANCELLED) moves it through the state machine — see `server/agents/`.
 */
export const agentTaskTool = defineTool({
  name: AGENT_TASK_TOOL,
  description:
    "A task an agent performs itself (write code, review, decide); the agent reports progress and completion.",
  inputSchema: agentTaskInputSchema,
  capability: "agent.work",
  capabilityLabel: "Agent task",
  readOnly: false,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 86_400,
  async execute() {
    throw new Error("agent_task is carried out by an agent through its session, not executed by a worker");
  },
});
