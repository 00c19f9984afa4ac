import { McpServer, ResourceTemplate } from "@modelcontextprotocol/sdk/server/mcp.js";
import type { RequestHandlerExtra } from "@modelcontextprotocol/sdk/shared/protocol.js";
import type { CallToolResult, ServerNotification, ServerRequest } from "@modelcontextprotocol/sdk/types.js";
import { z } from "zod";
import {
  addStepInput,
  addSteps,
  readPlan,
  setupPlan,
  setupPlanInput,
  todoKeyFor,
  todoOwnerPrefix,
  todoPlanSchema,
  updateStep,
  updateStepInput,
} from "../agents/todo-plans";
import {
  askUser,
  askUserInput,
  enterPlanMode,
  enterPlanModeInput,
  exitPlanMode,
  exitPlanModeInput,
  getAnswer,
  getAnswerInput,
  submitPlan,
  submitPlanInput,
} from "../agents/plan-mode";
import type { AppContext } from "../services";
import { AppError } from "../errors";
import { withCaller } from "../caller-context";
import { toProblem } from "../http/problem";
import { logger } from "../logger";
import { roleOf, type Identity } from "../identity";
import { invokeOperation, mayCall } from "../operations/operation";
import { currentIdentity } from "../people/principals";
import { roleAtLeast, type Role } from "../vocabulary";
import { operations, type AnyOperation } from "../operations/registry";
import { exportPlanMarkdown } from "../plans/export";
import { getPlan } from "../plans/service";
import { snakeSchema, strictParameters, toOperationInput, toSnakeAnswer } from "./naming";
import { restrictToolsInPlanMode } from "./plan-mode-tools";
import { currentPlanningSessionOf, planModeOwnerOf } from "../agents/agent-plan-mode";
import { resumeTodoPlan } from "../agents/todo-durability";

/**
 * The MCP door: every agent-facing operation of the registry as a tool (seed 003's loop under its
 * own names — `start`, `status`, `update`, `alert`, `suggest` — the rest as `plan_create`,
 * `run_events`, …), seed 000's four planning tools, and plans as resources. Decisions that are a
 * person's (approve, deny, answer) are not offered. Tool errors come back as results with
 * `isError` and the same problem object the HTTP API answers.
 */
const SEED_003_NAMES: Record<string, string> = {
  "agent.start": "start",
  "agent.status": "status",
  "agent.update": "update",
  "agent.alert": "alert",
  "agent.suggest": "suggest",
};

export function toolName(operation: AnyOperation): string {
  return SEED_003_NAMES[operation.name] ?? operation.name.replaceAll(".", "_");
}

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

/**
 * The session's caller as they are at this call, not as they were at `initialize`: the credential
 * is looked up again (revoked: unauthorized) and a person's role read again, which must reach
 * `needs`. An MCP session lives for an hour; authority is decided at each use.
 */
async function callerNow(app: AppContext, identity: Identity, needs: Role, what: string): Promise<Identity> {
  const now = await currentIdentity(app.db.pool, identity);
  if (!now) {
    throw new AppError(
      "unauthorized",
      `The credential this MCP session was opened with was revoked; ${what} is refused`,
    );
  }
  if (now.kind === "person" && !roleAtLeast(roleOf(now), needs)) {
    throw new AppError("forbidden", `${what} needs the role ${needs} or above; ${now.name} is a ${roleOf(now)}.`, {
      role: roleOf(now),
      roleNeeded: needs,
    });
  }
  return now;
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

/**
 * A tool whose input the domain checks beyond its declared shape (seed 000's title rules, seed
 * 002's plan fields): the SDK checks `shape` plus one routing field (`session_id`, the planning
 * session), the domain schema `input` the rest, for one clear error. `run` gets the parsed input,
 * the routing field's value and the call's abort signal.
 */
function registerCheckedTool(
  server: McpServer,
  tool: {
    name: string;
    description: string;
    input: z.ZodType;
    shape: z.ZodRawShape;
    routing: Record<string, z.ZodType>;
    app: AppContext;
    /** The caller: what the tool writes is stored as this identity's, by kind. */
    identity: Identity;
    outputSchema?: z.ZodObject;
    annotations: { readOnlyHint: boolean; idempotentHint: boolean; destructiveHint: boolean };
  },
  run: (input: never, routing: string | undefined, signal: AbortSignal) => Promise<unknown>,
): void {
  const [routingName] = Object.keys(tool.routing);
  server.registerTool(
    tool.name,
    {
      description: tool.description,
      inputSchema: strictParameters({ ...tool.shape, ...tool.routing }),
      ...(tool.outputSchema && { outputSchema: snakeSchema(tool.outputSchema, "output") as z.ZodObject }),
      annotations: { ...tool.annotations, openWorldHint: false },
    },
    ((raw: Record<string, unknown>, extra: ToolExtra) =>
      // Seed 000/002's own tools: reads need a viewer, the rest propose plans (a reviewer's).
      guarded(
        tool.name,
        { app: tool.app, identity: tool.identity, needs: tool.annotations.readOnlyHint ? "viewer" : "reviewer" },
        async () => {
          const { [routingName!]: routing, ...rest } = raw;
          const parsed = tool.input.safeParse(rest);
          if (!parsed.success) throw invalid(parsed.error);
          return run(parsed.data as never, routing as string | undefined, extra.signal);
        },
      )) as never,
  );
}

/** Output schemas must describe an object; unions (seed 003's status answers) go without one. */
function objectSchema(schema: z.ZodType): z.ZodObject | undefined {
  return schema instanceof z.ZodObject ? schema : undefined;
}

export interface McpSessionContext {
  app: AppContext;
  identity: Identity;
  /** The MCP session's id, which keys its seed 000 todo plan. */
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
    const name = toolName(operation);
    const output = objectSchema(operation.output);
    server.registerTool(
      name,
      {
        description: operation.summary,
        inputSchema: snakeSchema(operation.input, "input") as z.ZodObject,
        ...(output && { outputSchema: snakeSchema(output, "output") as z.ZodObject }),
        annotations: {
          readOnlyHint: operation.annotations?.readOnly ?? false,
          destructiveHint: operation.annotations?.destructive ?? false,
          idempotentHint: operation.annotations?.idempotent ?? operation.annotations?.readOnly ?? false,
          openWorldHint: false,
        },
      },
      (input: unknown, extra: ToolExtra) =>
        // invokeOperation checks the caller as it is now: its role against the operation's.
        guarded(name, { app, identity, needs: "viewer" }, (now) =>
          invokeOperation(
            operation,
            { app, identity: now, signal: extra.signal, progress: progressOf(extra) },
            toOperationInput(input, operation.input),
          ),
        ),
    );
  }

  // Seed 000: one todo plan per MCP session, or per `session_id` the client passes.
  const sessionField = {
    session_id: z.string().min(1).max(200).optional().describe("Key the plan by this id instead of the MCP session"),
  };
  const key = async (explicit: string | undefined) => {
    if (explicit) return todoKeyFor(identity, explicit);
    const id = context.sessionId();
    if (!id) throw new AppError("invalid_input", "This connection has no MCP session; pass session_id");
    const planKey = todoKeyFor(identity, id);
    // After a restart the agent's new connection picks up the todo plan of its lost one.
    if (context.isLive) {
      await resumeTodoPlan(app, {
        key: planKey,
        ownerPrefix: todoOwnerPrefix(identity),
        mcpSessionId: id,
        actor: identity.name,
        isLive: context.isLive,
      });
    }
    return planKey;
  };
  // The SDK checks the shape; the seed's rules (non-empty titles, ≤ 500 characters, one of
  // title or status) are the domain schema's.
  const planningTool = (
    name: string,
    description: string,
    input: z.ZodType,
    shape: z.ZodRawShape,
    run: (input: never, key: string) => Promise<unknown>,
    annotations: { readOnlyHint: boolean; idempotentHint: boolean; destructiveHint: boolean },
  ) =>
    registerCheckedTool(
      server,
      {
        name,
        description,
        input,
        shape,
        routing: sessionField,
        app,
        identity,
        outputSchema: todoPlanSchema,
        annotations,
      },
      async (parsed, explicit) => run(parsed, await key(explicit)),
    );

  planningTool(
    "planning_setup_plan",
    "Create or replace this session's todo plan: an objective and optional initial steps (ids start at 1). Use a plan for multi-step work; skip it for trivial tasks. Order: planning_setup_plan → planning_add_step → planning_update_step → planning_read_plan",
    setupPlanInput,
    {
      objective: z.string().describe("What the plan achieves"),
      initial_steps: z.array(z.string()).optional().describe("Step titles, in order"),
    },
    (input: z.output<typeof setupPlanInput>, planKey) =>
      setupPlan(app, {
        ...input,
        key: planKey,
        actor: identity.name,
        // A plan keyed by this connection, not by the client's own id, can be resumed after a restart.
        ...(planKey === todoKeyFor(identity, context.sessionId() ?? "") && { mcpSession: context.sessionId() }),
      }),
    { readOnlyHint: false, idempotentHint: false, destructiveHint: true },
  );
  planningTool(
    "planning_add_step",
    "Append steps to the active todo plan, after planning_setup_plan (fails without a plan, or when it is completed)",
    addStepInput,
    { steps: z.array(z.string()).describe("Step titles, in order") },
    (input: z.output<typeof addStepInput>, planKey) => addSteps(app, { ...input, key: planKey, actor: identity.name }),
    { readOnlyHint: false, idempotentHint: false, destructiveHint: false },
  );
  planningTool(
    "planning_update_step",
    "Report progress on a todo step: its title or status (pending, in_progress, done; a done step can be reopened); the plan completes when every step is done",
    updateStepInput,
    {
      step_id: z.number().int().describe("The step's id"),
      title: z.string().optional(),
      status: z.enum(["pending", "in_progress", "done"]).optional(),
    },
    (input: z.output<typeof updateStepInput>, planKey) =>
      updateStep(app, { ...input, key: planKey, actor: identity.name }),
    { readOnlyHint: false, idempotentHint: true, destructiveHint: false },
  );
  planningTool(
    "planning_read_plan",
    "Read this session's todo plan to check where you are (fails when there is none)",
    z.object({}),
    {},
    (_input: never, planKey) => readPlan(app, planKey),
    { readOnlyHint: true, idempotentHint: true, destructiveHint: false },
  );

  // Seed 002's planning mode for this agent: enter, ask the person, submit for review. It is the
  // agent's (name and credential), stored with its planning session: any connection of the agent,
  // before or after a restart, works on the same one.
  const owner = planModeOwnerOf(identity);
  const caller = { actor: identity.name, credential: owner.credential };
  const planningField = {
    planning_session_id: z
      .string()
      .optional()
      .describe("The planning session (default: the one this agent is planning in)"),
  };
  const currentPlanning = async (explicit: unknown) => {
    const id = typeof explicit === "string" ? explicit : await currentPlanningSessionOf(app.db.pool, owner);
    if (!id) throw new AppError("not_found", "Not in plan mode: call enter_plan_mode first");
    return id;
  };
  const planModeTool = (
    name: string,
    description: string,
    input: z.ZodObject,
    run: (input: never, sessionId: string | undefined, signal: AbortSignal) => Promise<unknown>,
    annotations: { readOnlyHint: boolean; idempotentHint: boolean },
  ) =>
    registerCheckedTool(
      server,
      {
        name,
        description,
        input,
        shape: input.shape,
        routing: planningField,
        app,
        identity,
        annotations: { ...annotations, destructiveHint: false },
      },
      run,
    );
  planModeTool(
    "enter_plan_mode",
    "Tell the person you want to plan before acting, and why; then gather context read-only, ask_user, and submit_plan",
    enterPlanModeInput,
    (input: z.output<typeof enterPlanModeInput>) => enterPlanMode(app, { reason: input.reason, ...caller }),
    { readOnlyHint: false, idempotentHint: false },
  );
  planModeTool(
    "ask_user",
    "Ask the person a question in the browser; waits up to wait_seconds for the answer, else returns a question_id for get_answer",
    askUserInput,
    async (input: z.output<typeof askUserInput>, explicit, signal) =>
      askUser(app, { ...input, sessionId: await currentPlanning(explicit), ...caller }, signal),
    { readOnlyHint: false, idempotentHint: false },
  );
  planModeTool(
    "get_answer",
    "Wait for the answer to an earlier ask_user question",
    getAnswerInput,
    async (input: z.output<typeof getAnswerInput>, explicit, signal) =>
      getAnswer(app, { ...input, sessionId: await currentPlanning(explicit), ...caller }, signal),
    { readOnlyHint: true, idempotentHint: true },
  );
  planModeTool(
    "exit_plan_mode",
    "Leave plan mode without waiting for a decision: a session still gathering is cancelled; a submitted plan stays for review",
    exitPlanModeInput,
    async (input: z.output<typeof exitPlanModeInput>, explicit) =>
      exitPlanMode(app, { ...input, sessionId: await currentPlanning(explicit), ...caller }),
    { readOnlyHint: false, idempotentHint: true },
  );
  planModeTool(
    "submit_plan",
    "Submit the plan (summary, steps with description, tools and risk, open questions, context notes) for the person's review; resubmit to revise",
    submitPlanInput,
    async (input: z.output<typeof submitPlanInput>, explicit) =>
      submitPlan(app, { ...input, sessionId: await currentPlanning(explicit), ...caller }),
    { readOnlyHint: false, idempotentHint: false },
  );

  server.registerResource(
    "plan",
    new ResourceTemplate("stepwise://plans/{planId}", { list: undefined }),
    { description: "A plan's current version as JSON", mimeType: "application/json" },
    async (uri, variables) => {
      await callerNow(app, identity, "viewer", "reading a plan");
      const plan = await getPlan(app.db.prisma, String(variables.planId));
      return { contents: [{ uri: uri.href, mimeType: "application/json", text: JSON.stringify(plan, null, 2) }] };
    },
  );
  server.registerResource(
    "plan-markdown",
    new ResourceTemplate("stepwise://plans/{planId}/markdown", { list: undefined }),
    { description: "A plan's current version as Markdown", mimeType: "text/markdown" },
    async (uri, variables) => {
      await callerNow(app, identity, "viewer", "reading a plan");
      const plan = await getPlan(app.db.prisma, String(variables.planId));
      return { contents: [{ uri: uri.href, mimeType: "text/markdown", text: exportPlanMarkdown(plan).content }] };
    },
  );
  restrictToolsInPlanMode(server, { app, owner });
  return server;
}

function invalid(error: z.ZodError): AppError {
  const message = error.issues
    .map((issue) => (issue.path.length ? `${issue.path.join(".")}: ` : "") + issue.message)
    .join("; ");
  return new AppError("invalid_input", message, {
    issues: error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })),
  });
}
