import type { McpServer, RegisteredTool } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { AppContext } from "../services";
import type { Identity } from "../identity";
import { planModeRefusal } from "../operations/operation";
import {
  heardFromPlanMode,
  planModeHolderKey,
  planModeOfCaller,
  takePersonMessages,
} from "../operations/mcp-connection";
import { operations } from "../operations/registry";
import { toProblem } from "../http/problem";
import { toolName } from "./naming";

/**
 * Seed 002's plan mode, enforced on Stepwise's own tools: while the agent's planning session holds
 * it in plan mode (whichever connection entered it; server/policy/plan-mode-fact.ts), the server
 * lists and accepts only tools that change nothing (annotated read-only) and the plan-mode
 * conversation itself (the operations annotated `planModeConversation`, which the authority policy
 * lets through too). Everything else is hidden from `tools/list` and refused with a problem saying
 * why; entering and leaving send `notifications/tools/list_changed` (the SDK sends one per
 * enable/disable; the server debounces them into one).
 *
 * Plan mode can end without a call from this connection (a person approves, rejects or cancels in
 * the browser, a timer fires), so the state is read again before every `tools/list` and around
 * every `tools/call`.
 */
export const PLAN_MODE_CONVERSATION: readonly string[] = operations
  .filter((operation) => operation.annotations?.planModeConversation === true)
  .map(toolName);

export function allowedInPlanMode(name: string, tool: Pick<RegisteredTool, "annotations">): boolean {
  return PLAN_MODE_CONVERSATION.includes(name) || tool.annotations?.readOnlyHint === true;
}

type RawHandler = (request: { method: string; params?: { name?: unknown } }, extra: unknown) => Promise<unknown>;

/**
 * The live connections of each agent in this process, so a call on one that enters or leaves plan
 * mode brings the others' tool lists along at once (each sends its client `tools/list_changed`).
 * Connections in other processes, and changes a person makes in the browser, are picked up at the
 * connection's next request, which reads the state again.
 */
const LIVE = Symbol.for("stepwise.mcpPlanModeConnections");
function liveConnections(): Map<string, Set<() => Promise<void>>> {
  const holder = globalThis as typeof globalThis & { [LIVE]?: Map<string, Set<() => Promise<void>>> };
  holder[LIVE] ??= new Map();
  return holder[LIVE];
}

export function restrictToolsInPlanMode(
  server: McpServer,
  options: { app: Pick<AppContext, "db">; identity: Identity },
): void {
  // The SDK keeps both maps private (declared without a type); plan mode needs to wrap its
  // handlers, not replace its logic, so it reads them by name and states their shape here.
  const tools: Record<string, RegisteredTool> = server["_registeredTools"];
  const handlers: Map<string, RawHandler> = server.server["_requestHandlers"];
  const call = handlers.get("tools/call");
  const list = handlers.get("tools/list");
  if (!call || !list) throw new Error("Register the tools before restricting them in plan mode");

  let restricted = false;
  /** Reads the agent's plan mode; returns the planning session holding it, if any. */
  const refresh = async (): Promise<string | undefined> => {
    const holding = await planModeOfCaller(options.app, options.identity);
    const held = holding !== undefined;
    if (held === restricted) return holding;
    restricted = held;
    for (const [name, tool] of Object.entries(tools)) {
      if (allowedInPlanMode(name, tool)) continue;
      if (held) tool.disable();
      else tool.enable();
    }
    return holding;
  };
  const siblings = liveConnections();
  const key = planModeHolderKey(options.identity);
  const own = siblings.get(key) ?? new Set();
  siblings.set(key, own);
  const quietRefresh = () => refresh().then(() => undefined);
  own.add(quietRefresh);
  const previousOnClose = server.server.onclose;
  server.server.onclose = () => {
    own.delete(quietRefresh);
    if (own.size === 0) siblings.delete(key);
    previousOnClose?.();
  };

  handlers.set("tools/list", async (request, extra) => {
    await refresh();
    return list(request, extra);
  });
  handlers.set("tools/call", async (request, extra) => {
    const holding = await refresh();
    const name = typeof request.params?.name === "string" ? request.params.name : "";
    const tool = tools[name];
    if (restricted && tool && !allowedInPlanMode(name, tool)) return refusal(name);
    // Every call in plan mode shows the agent is still there: the gathering idle timer starts again.
    if (holding) await heardFromPlanMode(options.app, holding);
    try {
      const result = (await call(request, extra)) as CallToolResult;
      return await withPersonMessages(
        options.app,
        holding ?? (await planModeOfCaller(options.app, options.identity)),
        result,
      );
    } finally {
      // The call itself may have entered or left plan mode (enter_plan_mode, submit, exit): this
      // connection and the agent's other ones here follow.
      const before = restricted;
      await refresh();
      if (before !== restricted || PLAN_MODE_CONVERSATION.includes(name) || name === "enter_plan_mode") {
        await Promise.all(
          [...own].filter((other) => other !== quietRefresh).map((other) => other().catch(() => undefined)),
        );
      }
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
  const incoming = await takePersonMessages(app, sessionId);
  if (incoming.length === 0) return result;
  return { ...result, content: [...result.content, { type: "text", text: incoming.join("\n\n") }] };
}

function refusal(name: string): CallToolResult {
  const problem = toProblem(planModeRefusal(name));
  return { isError: true, content: [{ type: "text", text: JSON.stringify(problem, null, 2) }] };
}
