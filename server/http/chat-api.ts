import { randomUUID } from "node:crypto";
import { generateText, streamText, type ModelMessage } from "ai";
import { z } from "zod";
import type { AppContext } from "../app-context";
import { AppError } from "../errors";
import type { Span } from "@opentelemetry/api";
import { logger } from "../logger";
import { inSpan } from "../telemetry";
import { CONFIGURATION_HELP, requirePlanningModel } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { callModel } from "../planner/model-call";
import { refuseUnsafeInput } from "./input-guard";
import { problemResponse } from "./problem";
import { identityOf } from "./request-identity";

/**
 * Seed 001's `POST /chat`: a thin pass-through to the configured providers (through the AI SDK,
 * like the planner), answering the provider's response plus a `traceId` that finds the call in
 * the usage records. `stream: true` answers the text as it arrives (plain text, with the trace id
 * in the `x-trace-id` header).
 */
export const chatInput = z.object({
  messages: z
    .array(
      z.object({
        role: z.enum(["system", "user", "assistant"]),
        content: z.string().max(200_000),
      }),
    )
    .min(1, "Give at least one message")
    .max(500),
  /** `provider:model`, as Settings lists them; the default planning model otherwise. */
  model: z.string().max(200).optional(),
  stream: z.boolean().default(false),
  traceId: z.uuid().optional(),
});

export function chatFromApi(request: Request, app: AppContext): Promise<Response> {
  return inSpan("POST /api/chat", { "http.route": "POST /api/chat" }, (span) => chat(request, app, span));
}

async function chat(request: Request, app: AppContext, span: Span): Promise<Response> {
  try {
    identityOf(request);
    const refused = await refuseUnsafeInput(request);
    if (refused) return refused;
    let body: unknown;
    try {
      body = await request.json();
    } catch {
      throw new AppError("invalid_input", "The request body is not valid JSON");
    }
    const parsed = chatInput.safeParse(body);
    if (!parsed.success) throw new AppError("invalid_input", z.prettifyError(parsed.error));
    const input = parsed.data;
    const planner = plannerFor(app);
    if (planner.config.providers.length === 0) {
      throw new AppError("unavailable", "No LLM provider is configured for chat", { help: CONFIGURATION_HELP });
    }
    const modelId = requirePlanningModel(planner.config, input.model);
    const traceId = input.traceId ?? randomUUID();
    span.setAttributes({ "stepwise.trace_id": traceId, "gen_ai.request.model": modelId });
    const messages = input.messages as ModelMessage[];
    if (input.stream) {
      const result = streamText({
        model: planner.resolveModel(modelId),
        messages,
        abortSignal: AbortSignal.any([request.signal, AbortSignal.timeout(planner.config.callTimeoutMs)]),
        maxRetries: planner.config.maxRetries,
      });
      return result.toTextStreamResponse({ headers: { "x-trace-id": traceId, "x-model": modelId } });
    }
    const result = await callModel(planner, { scope: { traceId }, purpose: "chat", modelId }, (model, abortSignal) =>
      generateText({ model, messages, abortSignal, maxRetries: planner.config.maxRetries }),
    );
    return Response.json({
      traceId,
      model: modelId,
      text: result.text,
      finishReason: result.finishReason,
      usage: result.usage,
      response: { id: result.response.id, modelId: result.response.modelId },
    });
  } catch (error) {
    if (!(error instanceof AppError)) logger.error({ err: error }, "chat failed");
    return problemResponse(error);
  }
}
