import { redactUrl } from "../redact";
import { AppError } from "../errors";

/**
 * Planner configuration, read from the environment only. Keys never leave this module except
 * inside the provider objects: `describePlannerConfig` is what any interface may show.
 */

export type ProviderKind = "openai" | "anthropic" | "compatible";

export interface ProviderConfig {
  kind: ProviderKind;
  /** What the UI calls it ("OpenAI", "Anthropic", or STEPWISE_LLM_NAME for a compatible endpoint). */
  label: string;
  baseUrl?: string;
  apiKey?: string;
  models: string[];
  /** Whether the endpoint accepts `response_format: json_schema` (compatible endpoints only). */
  structuredOutputs: boolean;
}

export interface ModelPrice {
  /** US dollars per million input tokens. */
  input: number;
  /** US dollars per million output tokens. */
  output: number;
}

export interface PlannerConfig {
  providers: ProviderConfig[];
  /** `provider:model`, e.g. `openai:gpt-4.1-mini`; the first configured model when not set. */
  defaultModel: string | undefined;
  /** Judge every draft unless the request says otherwise. */
  judgeByDefault: boolean;
  /** Model for the judge; the planning model when not set. */
  judgeModel: string | undefined;
  /** Draft → critique → refine: how many refinements after the first draft. */
  maxRefinements: number;
  /** Upper bound for one model call, after which it counts as a timeout. */
  callTimeoutMs: number;
  /** Deep mode: model turns (tool calls) before the planner must submit. */
  maxDeepSteps: number;
  /** Retries of one call on 429/5xx inside the AI SDK, with its backoff. */
  maxRetries: number;
  /** Deep mode: how long a question waits for the person before the session is cancelled. */
  answerTimeoutMs: number;
  prices: Record<string, ModelPrice>;
}

/** Public prices in USD per million tokens for common hosted models; local models are free/unknown. */
const KNOWN_PRICES: Record<string, ModelPrice> = {
  "gpt-4.1": { input: 2, output: 8 },
  "gpt-4.1-mini": { input: 0.4, output: 1.6 },
  "gpt-4.1-nano": { input: 0.1, output: 0.4 },
  "gpt-4o": { input: 2.5, output: 10 },
  "gpt-4o-mini": { input: 0.15, output: 0.6 },
  "o4-mini": { input: 1.1, output: 4.4 },
  "claude-sonnet-4-5": { input: 3, output: 15 },
  "claude-opus-4-1": { input: 15, output: 75 },
  "claude-haiku-4-5": { input: 1, output: 5 },
  "claude-3-5-haiku-latest": { input: 0.8, output: 4 },
};

export const DEFAULT_MODELS: Record<Exclude<ProviderKind, "compatible">, string[]> = {
  openai: ["gpt-4.1-mini", "gpt-4.1", "gpt-4o-mini"],
  anthropic: ["claude-sonnet-4-5", "claude-haiku-4-5"],
};

type Env = Record<string, string | undefined>;

function list(raw: string | undefined): string[] {
  return (raw ?? "")
    .split(",")
    .map((item) => item.trim())
    .filter(Boolean);
}

function positiveInt(env: Env, name: string, fallback: number, min = 1): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < min) throw new Error(`${name} must be an integer ≥ ${min}, got "${raw}"`);
  return value;
}

function prices(env: Env): Record<string, ModelPrice> {
  const raw = env.STEPWISE_LLM_PRICES;
  if (!raw) return { ...KNOWN_PRICES };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    throw new Error('STEPWISE_LLM_PRICES must be JSON like {"my-model":{"input":0.5,"output":1.5}}');
  }
  return { ...KNOWN_PRICES, ...(parsed as Record<string, ModelPrice>) };
}

export function readPlannerConfig(env: Env = process.env): PlannerConfig {
  const providers: ProviderConfig[] = [];
  if (env.OPENAI_API_KEY) {
    providers.push({
      kind: "openai",
      label: "OpenAI",
      apiKey: env.OPENAI_API_KEY,
      ...(env.OPENAI_BASE_URL && { baseUrl: env.OPENAI_BASE_URL }),
      models: list(env.STEPWISE_OPENAI_MODELS).length ? list(env.STEPWISE_OPENAI_MODELS) : DEFAULT_MODELS.openai,
      structuredOutputs: true,
    });
  }
  if (env.ANTHROPIC_API_KEY) {
    providers.push({
      kind: "anthropic",
      label: "Anthropic",
      apiKey: env.ANTHROPIC_API_KEY,
      ...(env.ANTHROPIC_BASE_URL && { baseUrl: env.ANTHROPIC_BASE_URL }),
      models: list(env.STEPWISE_ANTHROPIC_MODELS).length
        ? list(env.STEPWISE_ANTHROPIC_MODELS)
        : DEFAULT_MODELS.anthropic,
      structuredOutputs: true,
    });
  }
  if (env.STEPWISE_LLM_BASE_URL) {
    const models = list(env.STEPWISE_LLM_MODELS);
    if (models.length === 0) {
      throw new Error(
        "STEPWISE_LLM_BASE_URL is set: name the endpoint's models in STEPWISE_LLM_MODELS (comma-separated)",
      );
    }
    providers.push({
      kind: "compatible",
      label: env.STEPWISE_LLM_NAME || "OpenAI-compatible",
      baseUrl: env.STEPWISE_LLM_BASE_URL.replace(/\/+$/, ""),
      ...(env.STEPWISE_LLM_API_KEY && { apiKey: env.STEPWISE_LLM_API_KEY }),
      models,
      structuredOutputs: env.STEPWISE_LLM_STRUCTURED_OUTPUTS !== "0",
    });
  }
  const judge = env.STEPWISE_PLANNER_JUDGE ?? "off";
  return {
    providers,
    defaultModel: env.STEPWISE_PLANNER_MODEL || (providers[0] && modelId(providers[0].kind, providers[0].models[0]!)),
    judgeByDefault: judge === "on" || judge === "1",
    judgeModel: env.STEPWISE_PLANNER_JUDGE_MODEL || undefined,
    maxRefinements: positiveInt(env, "STEPWISE_PLANNER_REFINEMENTS", 2, 0),
    callTimeoutMs: positiveInt(env, "STEPWISE_PLANNER_TIMEOUT_MS", 120_000),
    maxDeepSteps: positiveInt(env, "STEPWISE_PLANNER_MAX_STEPS", 25),
    maxRetries: positiveInt(env, "STEPWISE_PLANNER_RETRIES", 2, 0),
    answerTimeoutMs: positiveInt(env, "STEPWISE_PLANNER_ANSWER_TIMEOUT_MS", 30 * 60_000),
    prices: prices(env),
  };
}

/** Model ids are `provider:model`; a model name may itself contain `:` (Ollama tags). */
export function modelId(kind: ProviderKind, model: string): string {
  return `${kind}:${model}`;
}

export function parseModelId(id: string): { kind: ProviderKind; model: string } | undefined {
  const colon = id.indexOf(":");
  if (colon <= 0) return undefined;
  const kind = id.slice(0, colon);
  if (kind !== "openai" && kind !== "anthropic" && kind !== "compatible") return undefined;
  const model = id.slice(colon + 1);
  return model ? { kind, model } : undefined;
}

/** Every model the user may pick, as `provider:model` ids. */
export function availableModels(config: PlannerConfig): { id: string; label: string }[] {
  const models = config.providers.flatMap((provider) =>
    provider.models.map((model) => ({ id: modelId(provider.kind, model), label: `${provider.label} · ${model}` })),
  );
  if (config.defaultModel && !models.some((model) => model.id === config.defaultModel)) {
    const parsed = parseModelId(config.defaultModel);
    const provider = config.providers.find((p) => p.kind === parsed?.kind);
    if (parsed && provider) models.unshift({ id: config.defaultModel, label: `${provider.label} · ${parsed.model}` });
  }
  return models;
}

/** The exact settings that make the planner work, shown whenever none is configured. */
export const CONFIGURATION_HELP = [
  { variable: "OPENAI_API_KEY", example: "sk-…", meaning: "use OpenAI (models in STEPWISE_OPENAI_MODELS)" },
  {
    variable: "ANTHROPIC_API_KEY",
    example: "sk-ant-…",
    meaning: "use Anthropic (models in STEPWISE_ANTHROPIC_MODELS)",
  },
  {
    variable: "STEPWISE_LLM_BASE_URL",
    example: "http://127.0.0.1:11434/v1",
    meaning: "use an OpenAI-compatible endpoint (Ollama, vLLM, LM Studio); also set STEPWISE_LLM_MODELS, e.g. llama3.1",
  },
] as const;

/** Removes credentials that may sit in a URL's user-info before showing it. */
export interface PublicPlannerConfig {
  configured: boolean;
  providers: { kind: ProviderKind; label: string; baseUrl: string | null; keySet: boolean; models: string[] }[];
  models: { id: string; label: string }[];
  defaultModel: string | null;
  judgeByDefault: boolean;
  judgeModel: string | null;
  maxRefinements: number;
  callTimeoutMs: number;
  maxDeepSteps: number;
  help: typeof CONFIGURATION_HELP;
}

/** What the settings page and the New task form may show: everything but the keys. */
export function describePlannerConfig(config: PlannerConfig): PublicPlannerConfig {
  return {
    configured: config.providers.length > 0,
    providers: config.providers.map((provider) => ({
      kind: provider.kind,
      label: provider.label,
      baseUrl: provider.baseUrl ? redactUrl(provider.baseUrl) : null,
      keySet: Boolean(provider.apiKey),
      models: provider.models,
    })),
    models: availableModels(config),
    defaultModel: config.defaultModel ?? null,
    judgeByDefault: config.judgeByDefault,
    judgeModel: config.judgeModel ?? null,
    maxRefinements: config.maxRefinements,
    callTimeoutMs: config.callTimeoutMs,
    maxDeepSteps: config.maxDeepSteps,
    help: CONFIGURATION_HELP,
  };
}

/**
 * The model a planner call uses: the requested one or the default, refused with exactly what to
 * set when no provider is configured, or with the available models when it is not one of them.
 */
export function requirePlanningModel(config: PlannerConfig, model?: string): string {
  if (config.providers.length === 0) {
    throw new AppError(
      "invalid_state",
      `No LLM provider is configured. Set ${CONFIGURATION_HELP.map((item) => item.variable).join(", or ")} and restart Stepwise.`,
      { help: CONFIGURATION_HELP },
    );
  }
  const chosen = model || config.defaultModel;
  const models = availableModels(config);
  if (!chosen || !models.some((candidate) => candidate.id === chosen)) {
    throw new AppError(
      "invalid_input",
      `Model ${chosen ?? "(none)"} is not configured. Available: ${models.map((candidate) => candidate.id).join(", ")}`,
    );
  }
  return chosen;
}
