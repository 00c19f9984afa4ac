import { z } from "zod";
import { defineTool, type TextGenerator } from "./types";

/** Bounds on what one step may send and ask for. */
export const LLM_GENERATE_LIMITS = { promptChars: 100_000, systemChars: 20_000, maxOutputTokens: 16_000 } as const;

/**
 * `llm_generate`: asks the configured model (the planner's providers) for text. The generator is
 * injected by the app context, so the tool holds no provider settings of its own.
 *
 * Not gated by default: it changes nothing in the workspace. It is not read-only either, because
 * it sends whatever the prompt holds (possibly workspace content through `$step` references) to a
 * provider and costs money, and it is not idempotent: a retry is a new, billed call with a
 * possibly different answer. See docs/decisions.md.
 */
export function createLlmGenerateTool(generator: TextGenerator) {
  return defineTool({
    name: "llm_generate",
    description:
      "Ask the configured language model for text (summaries, drafts, classifications). Returns the text; " +
      "reference it as $step_N in later steps. The step's token usage and cost are recorded.",
    inputSchema: z.object({
      prompt: z.string().min(1).max(LLM_GENERATE_LIMITS.promptChars),
      system: z.string().max(LLM_GENERATE_LIMITS.systemChars).optional(),
      maxOutputTokens: z.number().int().min(1).max(LLM_GENERATE_LIMITS.maxOutputTokens).optional(),
      /** `provider:model`; the planner's default model when not set. */
      model: z.string().min(1).max(200).optional(),
    }),
    outputSchema: z.string(),
    capability: "llm.generate",
    capabilityLabel: "Generate text with the LLM",
    readOnly: false,
    destructive: false,
    idempotent: false,
    requiresApproval: false,
    defaultTimeoutSeconds: 120,
    unavailableReason: () => generator.unavailableReason(),
    async execute(input, context) {
      const result = await generator.generate(input, {
        runId: context.runId,
        stepId: context.stepId,
        signal: context.signal,
      });
      const cost = result.costUsd === null ? "cost unknown" : `$${result.costUsd.toFixed(6)}`;
      context.log(`${result.model}: ${result.inputTokens} tokens in, ${result.outputTokens} out, ${cost}`);
      return result.text;
    },
  });
}
