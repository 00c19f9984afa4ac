import { generateText } from "ai";
import type { TextGenerator } from "../tools/types";
import { CONFIGURATION_HELP, requirePlanningModel } from "./config";
import type { PlannerDeps } from "./deps";
import { callModel } from "./model-call";
import { costOf } from "./usage";

/** The exact settings that make `llm_generate` work, said wherever it cannot. */
export const NO_PROVIDER_REASON = `no LLM provider is configured. Set ${CONFIGURATION_HELP.map((item) => item.variable).join(", or ")} (with STEPWISE_LLM_MODELS) and restart Stepwise.`;

/**
 * The `llm_generate` tool's way to the model: the planner's providers and `callModel`, so a step's
 * call has the same timeout, error sentences, span and `llm_calls` row (with its run and step) as
 * any planner call. `planner` is read on every call: tests and settings may replace it.
 */
export function createStepTextGenerator(planner: () => PlannerDeps): TextGenerator {
  return {
    unavailableReason() {
      return planner().config.providers.length === 0 ? NO_PROVIDER_REASON : undefined;
    },
    async generate(request, call) {
      const deps = planner();
      const modelId = requirePlanningModel(deps.config, request.model);
      const run = await deps.pool.query<{ trace_id: string; plan_id: string }>(
        "select trace_id, plan_id from runs where id = $1",
        [call.runId],
      );
      const scope = {
        traceId: run.rows[0]?.trace_id ?? call.runId,
        runId: call.runId,
        stepId: call.stepId,
        ...(run.rows[0] && { planId: run.rows[0].plan_id }),
      };
      const result = await callModel(
        deps,
        { scope, purpose: "step", modelId, signal: call.signal },
        (model, abortSignal) =>
          generateText({
            model,
            prompt: request.prompt,
            ...(request.system !== undefined && { system: request.system }),
            ...(request.maxOutputTokens !== undefined && { maxOutputTokens: request.maxOutputTokens }),
            abortSignal,
            maxRetries: deps.config.maxRetries,
          }),
      );
      const usage = { inputTokens: result.usage.inputTokens ?? 0, outputTokens: result.usage.outputTokens ?? 0 };
      return { text: result.text, model: modelId, ...usage, costUsd: costOf(deps.config, modelId, usage) ?? null };
    },
  };
}
