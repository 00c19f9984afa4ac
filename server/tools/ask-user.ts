import { z } from "zod";
import { defineTool } from "./types";

export const askUserInputSchema = z.object({
  question: z.string().trim().min(1, "A question is needed").max(2_000),
  /** When given, the answer must be one of these. */
  choices: z.array(z.string().min(1).max(200)).min(2).max(20).optional(),
});

/**
 * Asks the person watching the run. The engine never executes it: the step waits in
 * `awaiting_input` with an `input.requested` event, and the answer given through the run's page
 * (or the API) becomes the step's output.
 */
export const askUserTool = defineTool({
  name: "ask_user",
  description: "Ask the person running the plan a question; the answer becomes this step's output.",
  inputSchema: askUserInputSchema,
  /** The person's answer, as typed (or the choice picked). */
  outputSchema: z.string(),
  capability: "user.ask",
  capabilityLabel: "Ask the user",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 86_400,
  async execute() {
    throw new Error("ask_user is answered by a person through the run, not executed");
  },
});
