/**
 * A scripted OpenAI-compatible chat completions server for tests. The planner talks to it through
 * its real provider code (AI SDK over HTTP); each test queues the answers it wants, in order:
 * a JSON object, raw text, tool calls, an HTTP error, or a request that never gets an answer.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface ChatRequest {
  model: string;
  messages: { role: string; content?: unknown; tool_calls?: unknown[]; tool_call_id?: string }[];
  tools?: { type: string; function: { name: string } }[];
  response_format?: unknown;
  [key: string]: unknown;
}

export type ScriptedReply = (
  | { json: unknown }
  | { text: string }
  | { toolCalls: { name: string; arguments: unknown }[] }
  | { status: number; body?: string }
  | { hang: true }
) & {
  /** Answer only after this long: a model that takes its time. */
  delayMs?: number;
};

/** A function step may answer later (a promise): the request is held until it settles. */
export type ScriptStep = ScriptedReply | ((request: ChatRequest) => ScriptedReply | Promise<ScriptedReply>);

export interface ScriptedLlm {
  /** `http://127.0.0.1:<port>/v1`, what STEPWISE_LLM_BASE_URL points at. */
  baseUrl: string;
  port: number;
  /** Queues replies; each request takes the next one. */
  script(...steps: ScriptStep[]): void;
  /** Every request received so far, in order. */
  requests: ChatRequest[];
  /** Replies still queued. */
  pending(): number;
  reset(): void;
  close(): Promise<void>;
}

let callCounter = 0;

function tokens(value: unknown): number {
  return Math.max(1, Math.ceil(JSON.stringify(value ?? "").length / 4));
}

function readBody(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

function send(response: ServerResponse, status: number, body: unknown) {
  response.writeHead(status, { "content-type": "application/json" });
  response.end(typeof body === "string" ? body : JSON.stringify(body));
}

export async function startScriptedLlm(options: { port?: number } = {}): Promise<ScriptedLlm> {
  const queue: ScriptStep[] = [];
  const requests: ChatRequest[] = [];
  const hanging = new Set<ServerResponse>();
  // Control endpoints let a test in another process (Playwright) script a server it did not start.
  const server: Server = createServer((request, response) => {
    void (async () => {
      const raw = await readBody(request);
      if (request.method === "POST" && request.url === "/__script") {
        queue.push(...(JSON.parse(raw) as ScriptedReply[]));
        return send(response, 200, { queued: queue.length });
      }
      if (request.method === "POST" && request.url === "/__reset") {
        queue.length = 0;
        requests.length = 0;
        return send(response, 200, { ok: true });
      }
      if (request.method === "GET" && request.url === "/__requests") return send(response, 200, requests);
      if (request.method !== "POST" || !request.url?.endsWith("/chat/completions")) {
        return send(response, 404, { error: { message: `no route ${request.method} ${request.url}` } });
      }
      const body = JSON.parse(raw) as ChatRequest;
      requests.push(body);
      const next = queue.shift();
      if (!next) {
        return send(response, 500, { error: { message: "scripted LLM: no reply queued for this request" } });
      }
      const reply = typeof next === "function" ? await next(body) : next;
      if (reply.delayMs) await new Promise((resolve) => setTimeout(resolve, reply.delayMs));
      if ("hang" in reply) {
        hanging.add(response);
        response.on("close", () => hanging.delete(response));
        return;
      }
      if ("status" in reply) {
        return send(response, reply.status, reply.body ?? { error: { message: `scripted error ${reply.status}` } });
      }
      const message: Record<string, unknown> = { role: "assistant", content: null };
      let finishReason = "stop";
      if ("json" in reply) message.content = JSON.stringify(reply.json);
      if ("text" in reply) message.content = reply.text;
      if ("toolCalls" in reply) {
        finishReason = "tool_calls";
        message.tool_calls = reply.toolCalls.map((call) => ({
          id: `call_${++callCounter}`,
          type: "function",
          function: { name: call.name, arguments: JSON.stringify(call.arguments) },
        }));
      }
      const promptTokens = tokens(body.messages);
      const completionTokens = tokens(message.content ?? message.tool_calls);
      if ((body as { stream?: boolean }).stream && typeof message.content === "string") {
        // OpenAI's streaming shape: the text in a few chunks, then the finish and usage, then [DONE].
        const id = `chatcmpl-${++callCounter}`;
        const chunk = (delta: Record<string, unknown>, finish: string | null, usage?: object) =>
          `data: ${JSON.stringify({
            id,
            object: "chat.completion.chunk",
            created: Math.floor(Date.now() / 1000),
            model: body.model,
            choices: [{ index: 0, delta, finish_reason: finish }],
            ...(usage && { usage }),
          })}\n\n`;
        response.writeHead(200, { "content-type": "text/event-stream" });
        const text = message.content;
        const pieces = text.match(/.{1,8}/gs) ?? [""];
        response.write(chunk({ role: "assistant", content: "" }, null));
        for (const piece of pieces) response.write(chunk({ content: piece }, null));
        response.write(
          chunk({}, "stop", {
            prompt_tokens: promptTokens,
            completion_tokens: completionTokens,
            total_tokens: promptTokens + completionTokens,
          }),
        );
        response.end("data: [DONE]\n\n");
        return;
      }
      send(response, 200, {
        id: `chatcmpl-${++callCounter}`,
        object: "chat.completion",
        created: Math.floor(Date.now() / 1000),
        model: body.model,
        choices: [{ index: 0, message, finish_reason: finishReason }],
        usage: {
          prompt_tokens: promptTokens,
          completion_tokens: completionTokens,
          total_tokens: promptTokens + completionTokens,
        },
      });
    })().catch((error: unknown) => send(response, 500, { error: { message: String(error) } }));
  });
  await new Promise<void>((resolve) => server.listen(options.port ?? 0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    baseUrl: `http://127.0.0.1:${port}/v1`,
    port,
    script: (...steps) => queue.push(...steps),
    requests,
    pending: () => queue.length,
    reset() {
      queue.length = 0;
      requests.length = 0;
    },
    async close() {
      for (const response of hanging) response.destroy();
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

/** Scripts a server in another process through its control endpoint (Playwright specs). */
export async function scriptRemote(baseUrl: string, replies: ScriptedReply[]): Promise<void> {
  const origin = baseUrl.replace(/\/v1$/, "");
  const response = await fetch(`${origin}/__script`, { method: "POST", body: JSON.stringify(replies) });
  if (!response.ok) throw new Error(`scripting the LLM failed: ${response.status}`);
}
