import type { AppContext } from "../services";
import { AppError } from "../errors";
import type { Span } from "@opentelemetry/api";
import { logger } from "../logger";
import { inSpan } from "../telemetry";
import { chatComplete, streamChat } from "../operations/chat";
import { invokeOperation } from "../operations/operation";
import { readJsonBody } from "./input-guard";
import { problemResponse } from "./problem";
import { identityOf } from "./request-identity";

/**
 * Seed 001's `POST /chat` over the `chat.complete` operation (a person's, reviewer or above):
 * the provider's response plus a `traceId` that finds the call in the usage records.
 * `stream: true` answers the text as it arrives (plain text, with the trace id in the
 * `x-trace-id` header), checked against the same operation.
 */
export { chatInput } from "../operations/chat";

export function chatFromApi(request: Request, app: AppContext): Promise<Response> {
  return inSpan("POST /api/chat", { "http.route": "POST /api/chat" }, (span) => chat(request, app, span));
}

async function chat(request: Request, app: AppContext, span: Span): Promise<Response> {
  try {
    const context = { app, identity: identityOf(request), signal: request.signal };
    const body = await readJsonBody(request);
    if (typeof body === "object" && body !== null && (body as { stream?: unknown }).stream === true) {
      const streamed = streamChat(context, body);
      span.setAttributes({ "stepwise.trace_id": streamed.traceId, "gen_ai.request.model": streamed.modelId });
      return streamed.response;
    }
    const answer = await invokeOperation(chatComplete, context, body);
    span.setAttributes({ "stepwise.trace_id": answer.traceId, "gen_ai.request.model": answer.model });
    return Response.json(answer);
  } catch (error) {
    if (!(error instanceof AppError)) logger.error({ err: error }, "chat failed");
    return problemResponse(error);
  }
}
