import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { isInPlanMode } from "../agents/plan-mode";
import { touchPlanMode } from "../agents/wait-timers";
import type { AppContext } from "../services";
import { AppError } from "../errors";
import { toProblem } from "../http/problem";
import { markDelivered, messageForContext, undeliveredMessages } from "../planner/messages";

/**
 * Seed 002's plan mode, enforced on Stepwise's own tools: while the connection's planning session
 * holds it in plan mode, the server lists and accepts only tools that change nothing (annotated
 * read-only) and the plan-mode conversation itself. Everything else is hidden from `tools/list`
 * and refused with a problem saying why; entering and leaving send `notifications/tools/list_changed`
 * (the SDK sends one per enable/disable; the server debounces them into one).
 *
 * Plan mode can end without a call from this connection (a person approves, rejects or cancels in
 * the browser, a timer fires), so the state is read again before every `tools/list` and around
 * every `tools/call`.
 */
export const PLAN_MODE_CONVERSATION = ["ask_user", "get_answer", "submit_plan", "exit_plan_mode"] as const;

export function allowedInPlanMode(name: string, tool: Pick<RegisteredTool, "annotations">): boolean {
  return (PLAN_MODE_CONVERSATION as readonly string[]).includes(name) || tool.annotations?.readOnlyHint === true;
}

type RawHandler = (request: { method: string; params?: { name?: unknown } }, extra: unknown) => Promise<unknown>;

/** The SDK keeps both maps private; plan mode needs to wrap its handlers, not replace its logic. */
interface SdkInternals {
  _registeredTools: Record<string, RegisteredTool>;
}
interface ProtocolInternals {
  _requestHandlers: Map<string, RawHandler>;
}

export function restrictToolsInPlanMode(
  server: McpServer,
  options: { app: Pick<AppContext, "db">; planningSession: () => string | undefined },
): void {
  const tools = (server as unknown as SdkInternals)._registeredTools;
  const handlers = (server.server as unknown as ProtocolInternals)._requestHandlers;
  const call = handlers.get("tools/call");
  const list = handlers.get("tools/list");
  if (!call || !list) throw new Error("Register the tools before restricting them in plan mode");

  let restricted = false;
  const refresh = async () => {
    const sessionId = options.planningSession();
    const held = sessionId ? await isInPlanMode(options.app, sessionId) : false;
    if (held === restricted) return;
    restricted = held;
    for (const [name, tool] of Object.entries(tools)) {
      if (allowedInPlanMode(name, tool)) continue;
      if (held) tool.disable();
      else tool.enable();
    }
  };

  handlers.set("tools/list", async (request, extra) => {
    await refresh();
    return list(request, extra);
  });
  handlers.set("tools/call", async (request, extra) => {
    await refresh();
    const name = typeof request.params?.name === "string" ? request.params.name : "";
    const tool = tools[name];
    if (restricted && tool && !allowedInPlanMode(name, tool)) return refusal(name);
    // Every call in plan mode shows the agent is still there: the gathering idle timer starts again.
    const sessionId = options.planningSession();
    if (restricted && sessionId) await touchPlanMode(options.app.db.pool, sessionId);
    try {
      const result = (await call(request, extra)) as CallToolResult;
      return await withPersonMessages(options.app, options.planningSession(), result);
    } finally {
      // The call itself may have entered or left plan mode (enter_plan_mode, submit, exit).
      await refresh();
    }
  });
}

/**
 * Seed 002: a person's message during planning joins the agent's context — it comes with the
 * answer to the agent's next call, as one more text block, and is then marked delivered.
 */
async function withPersonMessages(
  app: Pick<AppContext, "db">,
  sessionId: string | undefined,
  result: CallToolResult,
): Promise<CallToolResult> {
  if (!sessionId || !Array.isArray(result.content)) return result;
  const incoming = await undeliveredMessages(app.db.pool, sessionId);
  if (incoming.length === 0) return result;
  await markDelivered(
    app.db.pool,
    incoming.map((message) => message.id),
  );
  return {
    ...result,
    content: [...result.content, { type: "text", text: incoming.map(messageForContext).join("\n\n") }],
  };
}

function refusal(name: string): CallToolResult {
  const problem = toProblem(
    new AppError(
      "invalid_state",
      `${name} is not available in plan mode: only read-only tools, ask_user, get_answer, submit_plan and exit_plan_mode are, until a person approves the plan (then your tasks come with status) or you call exit_plan_mode.`,
      { plan_mode: true, allowed: "read-only tools, ask_user, get_answer, submit_plan, exit_plan_mode" },
    ),
  );
  return { isError: true, content: [{ type: "text", text: JSON.stringify(problem, null, 2) }] };
}
