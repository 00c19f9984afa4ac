import { redactSecrets } from "../redact";
import { randomBytes } from "node:crypto";
import { APICallError } from "@ai-sdk/provider";
import { SpanStatusCode, trace } from "@opentelemetry/api";
import { NoObjectGeneratedError, RetryError, type LanguageModel, type LanguageModelUsage } from "ai";
import { AppError, isAppError } from "../errors";
import { appendEvents } from "../events/store";
import type { PlannerDeps } from "./deps";
import { costOf } from "./usage";

const tracer = trace.getTracer("stepwise.planner");

/** Where a model call belongs: its usage is counted for the session, plan and run it names. */
export interface CallScope {
  traceId: string;
  sessionId?: string;
  planId?: string;
  runId?: string;
  /** The run step whose `llm_generate` tool made the call. */
  stepId?: string;
}

export type CallPurpose = "draft" | "refine" | "judge" | "deep_step" | "suggest" | "recovery" | "chat" | "step";

export type ProviderFailureKind = "timeout" | "rate_limit" | "provider" | "auth" | "unreachable" | "unparsable";

/** Details of a `provider_error` AppError: what went wrong and whether trying again may help. */
export interface ProviderFailure {
  kind: ProviderFailureKind;
  retryable: boolean;
  status?: number;
}

/** The person (or a shutdown) cancelled the planning; not an error to report. */
export class PlanningCancelled extends Error {
  constructor() {
    super("Planning was cancelled");
    this.name = "PlanningCancelled";
  }
}

function providerError(kind: ProviderFailureKind, message: string, status?: number): AppError {
  const retryable = kind !== "auth";
  // Provider errors echo the URL they called, query string and all.
  return new AppError("provider_error", redactSecrets(message), {
    kind,
    retryable,
    ...(status && { status }),
  } satisfies ProviderFailure);
}

/** Turns whatever a provider call threw into one sentence a person can act on. */
export function describeProviderError(error: unknown, modelId: string, timeoutMs: number): AppError {
  if (isAppError(error)) return error;
  const last = RetryError.isInstance(error) ? error.lastError : error;
  if (APICallError.isInstance(last)) {
    const status = last.statusCode;
    if (status === 429) {
      return providerError(
        "rate_limit",
        `The provider of ${modelId} is rate limiting requests (HTTP 429). Wait a moment and retry.`,
        status,
      );
    }
    if (status === 401 || status === 403) {
      return providerError(
        "auth",
        `The provider of ${modelId} refused the API key (HTTP ${status}). Check the key in the environment.`,
        status,
      );
    }
    if (status === 404) {
      return providerError("provider", `The provider does not know the model ${modelId} (HTTP 404).`, status);
    }
    if (status !== undefined) {
      const body = (last.responseBody ?? "").slice(0, 200).replace(/\s+/g, " ").trim();
      return providerError(
        "provider",
        `The provider of ${modelId} failed with HTTP ${status}${body ? `: ${body}` : ""}. Retry, or pick another model.`,
        status,
      );
    }
    return providerError("unreachable", `Could not reach the provider of ${modelId} (${last.message}). Is it running?`);
  }
  if (NoObjectGeneratedError.isInstance(last)) {
    return providerError("unparsable", `The answer of ${modelId} could not be read as the requested JSON.`);
  }
  const message = last instanceof Error ? last.message : String(last);
  if (/fetch failed|ECONNREFUSED|ENOTFOUND|socket/i.test(message + String((last as Error)?.cause ?? ""))) {
    return providerError("unreachable", `Could not reach the provider of ${modelId}. Is it running?`);
  }
  if ((last as Error)?.name === "TimeoutError") {
    return providerError(
      "timeout",
      `${modelId} did not answer within ${Math.round(timeoutMs / 1000)} s. Retry, or raise STEPWISE_PLANNER_TIMEOUT_MS.`,
    );
  }
  return providerError("provider", `The call to ${modelId} failed: ${message.slice(0, 300)}`);
}

function usageOf(value: unknown): { inputTokens: number; outputTokens: number } {
  const usage = (value as { totalUsage?: LanguageModelUsage; usage?: LanguageModelUsage } | undefined) ?? {};
  const source = usage.totalUsage ?? usage.usage;
  return { inputTokens: source?.inputTokens ?? 0, outputTokens: source?.outputTokens ?? 0 };
}

/**
 * Runs one model call: inside a span that carries the Stepwise trace id, bounded by the planner's
 * timeout and the caller's cancellation, with its tokens and cost recorded (also when it fails),
 * and with any failure turned into a `provider_error` AppError that says what to do.
 */
export async function callModel<R>(
  deps: PlannerDeps,
  options: { scope: CallScope; purpose: CallPurpose; modelId: string; signal?: AbortSignal },
  run: (model: LanguageModel, abortSignal: AbortSignal) => Promise<R>,
): Promise<R> {
  const { scope, purpose, modelId } = options;
  if (options.signal?.aborted) throw new PlanningCancelled();
  const model = deps.resolveModel(modelId);
  const timeout = AbortSignal.timeout(deps.config.callTimeoutMs);
  const abortSignal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
  return tracer.startActiveSpan(`planner.${purpose}`, async (span) => {
    span.setAttributes({
      "stepwise.trace_id": scope.traceId,
      "stepwise.purpose": purpose,
      "gen_ai.request.model": modelId,
      ...(scope.sessionId && { "stepwise.planning_session_id": scope.sessionId }),
      ...(scope.planId && { "stepwise.plan_id": scope.planId }),
      ...(scope.runId && { "stepwise.run_id": scope.runId }),
      ...(scope.stepId && { "stepwise.step_id": scope.stepId }),
    });
    const spanContext = span.spanContext();
    // Without an OpenTelemetry SDK the span id is all zeros; a random id still tells calls apart.
    const spanId = /^0+$/.test(spanContext.spanId) ? randomBytes(8).toString("hex") : spanContext.spanId;
    const started = Date.now();
    let result: R | undefined;
    let failure: AppError | PlanningCancelled | undefined;
    let usage = { inputTokens: 0, outputTokens: 0 };
    try {
      result = await run(model, abortSignal);
      usage = usageOf(result);
    } catch (error) {
      usage = NoObjectGeneratedError.isInstance(error) ? usageOf(error) : usage;
      if (options.signal?.aborted) failure = new PlanningCancelled();
      else if (timeout.aborted) {
        failure = providerError(
          "timeout",
          `${modelId} did not answer within ${Math.round(deps.config.callTimeoutMs / 1000)} s. Retry, or raise STEPWISE_PLANNER_TIMEOUT_MS.`,
        );
      } else if (NoObjectGeneratedError.isInstance(error)) {
        // The caller decides: the refine loop feeds the text back to the model.
        span.setAttributes({
          "gen_ai.usage.input_tokens": usage.inputTokens,
          "gen_ai.usage.output_tokens": usage.outputTokens,
        });
        await recordCall(deps, options, usage, Date.now() - started, spanId, "unparsable output");
        span.setStatus({ code: SpanStatusCode.ERROR, message: "unparsable output" });
        span.end();
        throw error;
      } else failure = describeProviderError(error, modelId, deps.config.callTimeoutMs);
    }
    span.setAttributes({
      "gen_ai.usage.input_tokens": usage.inputTokens,
      "gen_ai.usage.output_tokens": usage.outputTokens,
    });
    await recordCall(deps, options, usage, Date.now() - started, spanId, failure?.message);
    if (failure) {
      span.setStatus({ code: SpanStatusCode.ERROR, message: failure.message });
      span.end();
      throw failure;
    }
    span.end();
    return result as R;
  });
}

async function recordCall(
  deps: PlannerDeps,
  options: { scope: CallScope; purpose: CallPurpose; modelId: string },
  usage: { inputTokens: number; outputTokens: number },
  durationMs: number,
  spanId: string,
  error: string | undefined,
): Promise<void> {
  const { scope, purpose, modelId } = options;
  const costUsd = costOf(deps.config, modelId, usage) ?? null;
  await deps.prisma.llmCall.create({
    data: {
      sessionId: scope.sessionId ?? null,
      planId: scope.planId ?? null,
      runId: scope.runId ?? null,
      stepId: scope.stepId ?? null,
      purpose,
      model: modelId,
      inputTokens: usage.inputTokens,
      outputTokens: usage.outputTokens,
      costUsd,
      durationMs,
      ok: !error,
      error: error ?? null,
      traceId: scope.traceId,
      spanId,
    },
  });
  if (scope.sessionId) {
    await appendEvents(
      deps.pool,
      { streamId: scope.sessionId, planId: scope.sessionId, runId: null, traceId: scope.traceId },
      [
        {
          type: "planning.usage",
          data: { purpose, model: modelId, ...usage, costUsd, durationMs, spanId, ok: !error },
        },
      ],
    );
  }
}
