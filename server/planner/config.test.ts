import { describe, expect, it } from "vitest";
import { availableModels, describePlannerConfig, parseModelId, readPlannerConfig } from "./config";
import { createModelResolver } from "./providers";
import { costOf } from "./usage";

describe("planner configuration", () => {
  it("is empty without keys or a base URL, and says what to set", () => {
    const config = readPlannerConfig({});
    expect(config.providers).toEqual([]);
    const described = describePlannerConfig(config);
    expect(described.configured).toBe(false);
    expect(described.help.map((item) => item.variable)).toEqual([
      "OPENAI_API_KEY",
      "ANTHROPIC_API_KEY",
      "STEPWISE_LLM_BASE_URL",
    ]);
  });

  it("configures each provider from its variables and never exposes keys", () => {
    const config = readPlannerConfig({
      OPENAI_API_KEY: "sk-openai-secret",
      ANTHROPIC_API_KEY: "sk-ant-secret",
      STEPWISE_LLM_BASE_URL: "http://user:pass-secret@127.0.0.1:11434/v1/",
      STEPWISE_LLM_MODELS: "llama3.1:8b, qwen2.5",
      STEPWISE_PLANNER_REFINEMENTS: "3",
    });
    expect(config.providers.map((provider) => provider.kind)).toEqual(["openai", "anthropic", "compatible"]);
    expect(config.defaultModel).toBe("openai:gpt-4.1-mini");
    expect(config.maxRefinements).toBe(3);
    const described = describePlannerConfig(config);
    expect(JSON.stringify(described)).not.toMatch(/secret/);
    expect(described.providers[2]).toMatchObject({ baseUrl: "http://127.0.0.1:11434/v1", keySet: false });
    expect(availableModels(config).map((model) => model.id)).toContain("compatible:llama3.1:8b");
  });

  it("refuses a base URL without models and malformed numbers", () => {
    expect(() => readPlannerConfig({ STEPWISE_LLM_BASE_URL: "http://x/v1" })).toThrow(/STEPWISE_LLM_MODELS/);
    expect(() => readPlannerConfig({ STEPWISE_PLANNER_TIMEOUT_MS: "soon" })).toThrow(/STEPWISE_PLANNER_TIMEOUT_MS/);
  });

  it("splits model ids on the first colon only (Ollama tags)", () => {
    expect(parseModelId("compatible:llama3.1:8b")).toEqual({ kind: "compatible", model: "llama3.1:8b" });
    expect(parseModelId("gpt-4")).toBeUndefined();
    expect(parseModelId("mystery:model")).toBeUndefined();
  });

  it("resolves a model of each configured provider through the AI SDK, and refuses unconfigured ones", () => {
    const resolve = createModelResolver(
      readPlannerConfig({
        OPENAI_API_KEY: "k",
        ANTHROPIC_API_KEY: "k",
        STEPWISE_LLM_BASE_URL: "http://x/v1",
        STEPWISE_LLM_MODELS: "m",
      }),
    );
    expect(resolve("openai:gpt-4.1").provider).toMatch(/^openai/);
    expect(resolve("anthropic:claude-sonnet-4-5").provider).toMatch(/^anthropic/);
    expect(resolve("compatible:m").provider).toMatch(/^compatible/);
    expect(() => createModelResolver(readPlannerConfig({}))("openai:gpt-4.1")).toThrow(/No openai provider/);
  });

  it("prices known models (dated snapshots by prefix) and leaves local ones unpriced", () => {
    const config = readPlannerConfig({});
    expect(costOf(config, "openai:gpt-4o-mini-2024-07-18", { inputTokens: 1_000_000, outputTokens: 0 })).toBeCloseTo(
      0.15,
    );
    expect(costOf(config, "compatible:llama3.1", { inputTokens: 1000, outputTokens: 1000 })).toBeUndefined();
  });
});
