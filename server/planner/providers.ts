import { createAnthropic } from "@ai-sdk/anthropic";
import { createOpenAI } from "@ai-sdk/openai";
import { createOpenAICompatible } from "@ai-sdk/openai-compatible";
import type { LanguageModelV3 } from "@ai-sdk/provider";
import { AppError } from "../errors";
import { parseModelId, type PlannerConfig } from "./config";

export type ModelResolver = (modelId: string) => LanguageModelV3;

/**
 * Turns a `provider:model` id into an AI SDK model of a configured provider. Every provider goes
 * through the AI SDK, so the planner code is the same for OpenAI, Anthropic and local endpoints.
 */
export function createModelResolver(config: PlannerConfig): ModelResolver {
  const cache = new Map<string, LanguageModelV3>();
  return (id) => {
    const cached = cache.get(id);
    if (cached) return cached;
    const parsed = parseModelId(id);
    if (!parsed)
      throw new AppError("invalid_input", `"${id}" is not a model id; use provider:model, e.g. openai:gpt-4.1`);
    const provider = config.providers.find((candidate) => candidate.kind === parsed.kind);
    if (!provider) {
      throw new AppError("invalid_input", `No ${parsed.kind} provider is configured for model ${id}`);
    }
    let model: LanguageModelV3;
    switch (provider.kind) {
      case "openai":
        // The Chat Completions API: the one every OpenAI-compatible server also speaks.
        model = createOpenAI({ apiKey: provider.apiKey, ...(provider.baseUrl && { baseURL: provider.baseUrl }) }).chat(
          parsed.model,
        );
        break;
      case "anthropic":
        model = createAnthropic({
          apiKey: provider.apiKey,
          ...(provider.baseUrl && { baseURL: provider.baseUrl }),
        })(parsed.model);
        break;
      case "compatible":
        model = createOpenAICompatible({
          name: "compatible",
          baseURL: provider.baseUrl!,
          ...(provider.apiKey && { apiKey: provider.apiKey }),
          supportsStructuredOutputs: provider.structuredOutputs,
          includeUsage: true,
        }).chatModel(parsed.model);
        break;
    }
    cache.set(id, model);
    return model;
  };
}
