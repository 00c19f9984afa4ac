import { randomUUID } from "node:crypto";
import { generateText, streamText, type ModelMessage } from "ai";
import { z } from "zod";
import { AppError } from "../errors";
import { CONFIGURATION_HELP, requirePlanningModel } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { callModel } from "../planner/model-call";
import { authorize, defineOperation, type OperationContext } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * Seed 001's `POST /api/chat`: a thin pass-through to the configured providers (through the AI
 * SDK, like the planner). It spends the model's budget as the planner does, so it asks the
 * planner's authority: a person, reviewer or above (docs/security.md, "Authority model"); an
 * agent has its own model and a viewer only reads.
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
type ChatInput = z.output<typeof chatInput>;

function chatModel({ app }: OperationContext, input: ChatInput) {
  const planner = plannerFor(app);
  if (planner.config.providers.length === 0) {
    throw new AppError("unavailable", "No LLM provider is configured for chat", { help: CONFIGURATION_HELP });
  }
  return {
    planner,
    modelId: requirePlanningModel(planner.config, input.model),
    traceId: input.traceId ?? randomUUID(),
  };
}

const tokens = z.number().optional();
/** The model call's token counts as the AI SDK reports them (`LanguageModelUsage`), the provider's raw usage with them. */
const modelUsageSchema = z.object({
  inputTokens: tokens,
  inputTokenDetails: z.object({ noCacheTokens: tokens, cacheReadTokens: tokens, cacheWriteTokens: tokens }).optional(),
  outputTokens: tokens,
  outputTokenDetails: z.object({ textTokens: tokens, reasoningTokens: tokens }).optional(),
  totalTokens: tokens,
  reasoningTokens: tokens,
  cachedInputTokens: tokens,
  raw: z.record(z.string(), z.unknown()).optional(),
});

export const chatComplete = defineOperation({
  name: "chat.complete",
  callers: PERSON_ONLY,
  role: "reviewer",
  summary:
    "Chat with the configured model: its answer to the messages, with a trace id that finds the call in the usage records",
  input: chatInput,
  output: z.object({
    traceId: z.string(),
    model: z.string(),
    text: z.string(),
    finishReason: z.string(),
    usage: modelUsageSchema,
    response: z.object({ id: z.string(), modelId: z.string() }),
  }),
  async run(context, input) {
    const { planner, modelId, traceId } = chatModel(context, input);
    const messages = input.messages as ModelMessage[];
    const result = await callModel(planner, { scope: { traceId }, purpose: "chat", modelId }, (model, abortSignal) =>
      generateText({ model, messages, abortSignal, maxRetries: planner.config.maxRetries }),
    );
    return {
      traceId,
      model: modelId,
      text: result.text,
      finishReason: result.finishReason,
      usage: result.usage,
      response: { id: result.response.id, modelId: result.response.modelId },
    };
  },
});

/**
 * `chat.complete` answered as the text arrives (`stream: true`): plain text, the trace id and
 * model in headers. Checked against the same operation before the model is asked.
 */
export function streamChat(
  context: OperationContext,
  rawInput: unknown,
): { response: Response; traceId: string; modelId: string } {
  authorize(chatComplete, context.identity, { authority: context.app.engine.authority });
  const parsed = chatInput.safeParse(rawInput);
  if (!parsed.success) throw new AppError("invalid_input", z.prettifyError(parsed.error));
  const { planner, modelId, traceId } = chatModel(context, parsed.data);
  const result = streamText({
    model: planner.resolveModel(modelId),
    messages: parsed.data.messages as ModelMessage[],
    abortSignal: AbortSignal.any([
      ...(context.signal ? [context.signal] : []),
      AbortSignal.timeout(planner.config.callTimeoutMs),
    ]),
    maxRetries: planner.config.maxRetries,
  });
  return {
    response: result.toTextStreamResponse({ headers: { "x-trace-id": traceId, "x-model": modelId } }),
    traceId,
    modelId,
  };
}

export const chatOperations = [chatComplete] as AnyOperation[];
