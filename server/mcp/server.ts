import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import type { AppContext } from "../services";
import { withCaller } from "../caller-context";
import { toProblem } from "../http/problem";
import { logger } from "../logger";
import type { Identity } from "../identity";
import type { Role } from "../vocabulary";
import { callerNow } from "../operations/mcp-connection";
import { invokeOperation, mayCall, type Operation, type OperationContext } from "../operations/operation";
import { planGet, planMarkdown } from "../operations/plans";
import type { AnyOperation } from "../operations/operation";
import { operations } from "../operations/registry";
import { snakeSchema, strictParameters, toOperationInput, toSnakeAnswer, toolName } from "./naming";
import { restrictToolsInPlanMode } from "./plan-mode-tools";
import { TODO_TOOL_PARAMETERS } from "./todo-tool-parameters";

/**
 * The MCP door: every operation of the registry an agent may call, as a tool — the loop of seed
 * 003 and the plan mode of seed 002 under the names their specs give them (`start`, `status`, …,
 * `enter_plan_mode`, `submit_plan`, …), the rest by the operation's name (`plan_create`,
 * `run_events`, `planning_setup_plan`, …) — and plans as resources, read through their
 * operations. Decisions that are a person's (approve, deny, answer) are not offered. Tool errors
 * come back as results with `isError` and the same problem object the HTTP API answers.
 */
export { toolName } from "./naming";

function result(answer: unknown): CallToolResult {
  // Seed 000's convention on this door: every answer's field names are snake_case.
  const output = toSnakeAnswer(answer);
  return {
    content: [{ type: "text", text: JSON.stringify(output, null, 2) }],
    ...(output !== null && typeof output === "object" && !Array.isArray(output)
      ? { structuredContent: output as Record<string, unknown> }
      : {}),
  };
}

function failure(error: unknown, tool: string): CallToolResult {
  const problem = toProblem(error);
  if (problem.status === 500) logger.error({ err: error, tool }, "MCP tool failed");
  // The problem object of the HTTP API, in this door's snake_case (an issue's `step_id`).
  return { isError: true, content: [{ type: "text", text: JSON.stringify(toSnakeAnswer(problem), null, 2) }] };
}

async function guarded(
  tool: string,
  caller: { app: AppContext; identity: Identity; needs: Role },
  work: (now: Identity) => Promise<unknown>,
): Promise<CallToolResult> {
  try {
    const now = await callerNow(caller.app, caller.identity, caller.needs, tool);
    return result(await withCaller(now, () => work(now)));
  } catch (error) {
    return failure(error, tool);
  }
}

type ToolExtra = RequestHandlerExtra<ServerRequest, ServerNotification>;

/** Progress of a long call (run.wait) as MCP progress notifications, when the client asked for them. */
function progressOf(extra: ToolExtra) {
  const token = extra._meta?.progressToken;
  if (token === undefined) return undefined;
  return (progress: number, total: number | undefined, message: string) =>
    void extra
      .sendNotification({
        method: "notifications/progress",
        params: { progressToken: token, progress, ...(total !== undefined && { total }), message },
      })
      .catch(() => undefined);
}

/** Output schemas must describe an object; unions (seed 003's status answers) go without one. */
function objectSchema(schema: z.ZodType): z.ZodObject | undefined {
  return schema instanceof z.ZodObject ? schema : undefined;
}

export interface McpSessionContext {
  app: AppContext;
  identity: Identity;
  /** The MCP session's id, which keys the caller's seed 000 todo plan (`OperationContext.connection`). */
  sessionId(): string | undefined;
  /** Whether that MCP session is still open (a todo plan of one that is gone may be resumed). */
  isLive?(id: string): boolean | Promise<boolean>;
}

export const MCP_INSTRUCTIONS = [
  "Stepwise plans and runs work that people watch and steer in the browser.",
  "Plan first (enter_plan_mode) when a task is complex or ambiguous — several files or steps, a risky or irreversible change, unclear requirements: gather context read-only, ask_user what is unclear, submit_plan, and wait for the person's review (plan_review_status). While in plan mode only read-only tools and the plan-mode tools are offered. Once the person approves, status hands you the plan's tasks in order; report each with update.",
  "For a whole task without review, follow the loop: start → status → (work, update) → status … → final_summary.",
  "For your own multi-step work, keep a todo list: planning_setup_plan → planning_add_step → planning_update_step → planning_read_plan. Skip it for trivial, single-step tasks.",
].join(" ");

export function createMcpServer(context: McpSessionContext): McpServer {
  const server = new McpServer(
    { name: "stepwise", version: "0.1.0" },
    {
      instructions: MCP_INSTRUCTIONS,
      // Entering or leaving plan mode enables or disables many tools at once: one notification.
      debouncedNotificationMethods: ["notifications/tools/list_changed"],
    },
  );
  const { app, identity } = context;

  for (const operation of operations) {
    // The same declaration invokeOperation enforces: what an agent may not call is not offered.
    if (!mayCall(operation, "agent")) continue;
    registerOperationTool(server, operation, context);
  }
  server.registerResource(
    "plan",
    new ResourceTemplate("stepwise://plans/{planId}", { list: undefined }),
    { description: "A plan's current version as JSON", mimeType: "application/json" },
    async (uri, variables) => {
      const plan = await readAsCaller(context, planGet, { planId: String(variables.planId) });
      return { contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(plan, null, 2) }] };
    },
  );
  server.registerResource(
    "plan-markdown",
    new ResourceTemplate("stepwise://plans/{planId}/markdown", { list: undefined }),
    { description: "A plan's current version as Markdown", mimeType: "text/markdown" },
    async (uri, variables) => {
      const { markdown } = await readAsCaller(context, planMarkdown, { planId: String(variables.planId) });
      return { contents: [{ uri: uri.href, mimeType: "text/markdown", text: markdown }] };
    },
  );
  restrictToolsInPlanMode(server, { app, identity });
  return server;
}

/**
 * One operation as one tool: its input and output schemas in this door's snake_case, its
 * annotations, and a call that runs it for the caller as they are now. Seed 000's todo tools
 * declare their parameters' shape only (`TODO_TOOL_PARAMETERS`), so that their own rules (titles
 * non-empty, ≤ 500 characters) answer as the problem object, from the operation.
 */
function registerOperationTool(server: McpServer, operation: AnyOperation, context: McpSessionContext): void {
  const { app, identity } = context;
  const name = toolName(operation);
  const output = objectSchema(operation.output);
  const declared = TODO_TOOL_PARAMETERS[operation.name];
  const input = declared ? strictParameters(declared) : snakeSchema(operation.input, "input");
  server.registerTool(
    name,
    {
      description: operation.summary,
      inputSchema: input as z.ZodObject,
      ...(output && { outputSchema: snakeSchema(output, "output") as z.ZodObject }),
      annotations: {
        readOnlyHint: operation.annotations?.readOnly ?? false,
        destructiveHint: operation.annotations?.destructive ?? false,
        idempotentHint: operation.annotations?.idempotent ?? operation.annotations?.readOnly ?? false,
        openWorldHint: false,
      },
    },
    (args: unknown, extra: ToolExtra) =>
      // invokeOperation checks the caller as it is now: its role against the operation's.
      guarded(name, { app, identity, needs: "viewer" }, (now) =>
        invokeOperation(operation, operationContext(context, now, extra), toOperationInput(args, operation.input)),
      ),
  );
}

function operationContext(context: McpSessionContext, identity: Identity, extra: ToolExtra): OperationContext {
  return {
    app: context.app,
    identity,
    signal: extra.signal,
    progress: progressOf(extra),
    connection: { id: context.sessionId(), ...(context.isLive && { isLive: context.isLive }) },
  };
}

/** A resource read through its operation, for the caller as they are now: the same authority as the tool. */
async function readAsCaller<Input extends z.ZodType, Output extends z.ZodType>(
  context: McpSessionContext,
  operation: Operation<Input, Output>,
  input: z.input<Input>,
): Promise<z.output<Output>> {
  const now = await callerNow(context.app, context.identity, operation.role, `reading a plan (${operation.name})`);
  return invokeOperation(operation, { app: context.app, identity: now }, input);
}
