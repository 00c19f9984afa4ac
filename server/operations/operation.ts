import { z } from "zod";
import type { AppContext } from "../services";
import { withCaller } from "../caller-context";
import { AppError } from "../errors";
import {
  authority as productionAuthority,
  principalOf,
  type Authority,
  type AuthorityDecision,
} from "../policy/authority";
import { decideCallNow, type CallAbout } from "../policy/call-now";
import type { CallerKind, Role } from "../vocabulary";
import { roleOf, type Identity } from "../identity";

/**
 * The operations layer: every use case an outside caller may perform, defined once, framework-free.
 * tRPC routers, the HTTP API, the MCP server and the CLI are adapters of a few lines over these:
 * they establish the caller's identity (the door), pass the raw input, and map `AppError` codes to
 * their own status codes. Input and output are zod schemas, so each adapter can also describe the
 * operation (OpenAPI, MCP tool schemas, CLI help) from the same source.
 *
 * Authority lives here too: each operation declares which kinds of caller may perform it, and both
 * ways in (`invokeOperation`, and `viaOperation` for tRPC) refuse every other caller before the
 * operation runs. There is no default, so an operation nobody thought about cannot be added.
 */
export interface OperationContext {
  app: AppContext;
  identity: Identity;
  /** Set by doors that can report progress of a long call (MCP progress notifications). */
  progress?: (progress: number, total: number | undefined, message: string) => void;
  /** Fires when the caller goes away (a cancelled MCP request, a closed connection). */
  signal?: AbortSignal;
  /**
   * The caller's connection, set by a door that keeps one per caller (an MCP session): what the
   * caller keeps by connection (seed 000's todo plan) is keyed by its id. `isLive` says whether this
   * process still holds a connection of that id (a todo plan of one it lost may be resumed).
   */
  connection?: { id: string | undefined; isLive?(id: string): boolean | Promise<boolean> };
}

export interface Operation<Input extends z.ZodType, Output extends z.ZodType> {
  /** Stable dotted name, e.g. `agent.status`; adapters derive routes and tool names from it. */
  name: string;
  summary: string;
  input: Input;
  output: Output;
  /**
   * Who may call it. `person` only: decisions — approving, denying, answering for a person,
   * waiving, steering past a gate, registering workspaces. Agents propose: they read, create and
   * edit plans, report progress and raise signals. Agent-facing doors (MCP) offer only operations
   * an agent may call. Rules finer than the kind (a person's pause outranks an agent's resume) are
   * in `server/operations/policy.ts` and the engine.
   */
  callers: readonly CallerKind[];
  /**
   * The least role a person needs to call it (`ROLES` in `server/vocabulary.ts`): viewer for reads;
   * reviewer to comment, request changes and propose or revise plans; approver to approve, deny,
   * waive, answer, decide and steer runs; admin for people, credentials, workspaces and policies.
   * Agents are bounded by `callers` and the engine's rules, not by a role.
   */
  role: Role;
  /**
   * What the operation does to the world (MCP tool annotations, documentation). `planModeConversation`:
   * one of plan mode's own calls (ask the person, wait for the answer, submit, exit), which an agent
   * that plan mode holds read-only may still make (server/policy/authority.ts).
   */
  annotations?: { readOnly?: boolean; destructive?: boolean; idempotent?: boolean; planModeConversation?: boolean };
  run(context: OperationContext, input: z.output<Input>): Promise<z.input<Output>>;
}

/** Any operation, whatever its input and output: what the registry lists and the doors adapt. */
export type AnyOperation = Operation<z.ZodType, z.ZodType>;

export function defineOperation<Input extends z.ZodType, Output extends z.ZodType>(
  operation: Operation<Input, Output>,
): Operation<Input, Output> {
  if (!Array.isArray(operation.callers) || operation.callers.length === 0) {
    throw new Error(`Operation ${operation.name} declares no callers`);
  }
  if (!operation.role) throw new Error(`Operation ${operation.name} declares no role`);
  return operation;
}

/** Whether a caller of this kind may perform the operation at all. */
export function mayCall(operation: { callers: readonly CallerKind[] }, kind: Identity["kind"]): boolean {
  return (operation.callers as readonly string[]).includes(kind);
}

type OperationShape = {
  name: string;
  callers: readonly CallerKind[];
  role: Role;
  annotations?: Operation<z.ZodType, z.ZodType>["annotations"];
};

/** What the policy's `operation.call` reads of an operation. */
function callAbout(operation: OperationShape): CallAbout {
  return {
    name: operation.name,
    callers: operation.callers,
    role: operation.role,
    readOnly: operation.annotations?.readOnly === true,
    planModeConversation: operation.annotations?.planModeConversation === true,
  };
}

/**
 * Refuses a missing identity, any caller the operation does not name, and a person whose role is
 * below the operation's, before anything happens — as the identity stands, with no lookup (the
 * doors' first check; `authorizeCall` and `authorizeNow` ask the policy with the caller as they
 * stand now). `authority` is the policy of the app context the door serves
 * (`app.engine.authority`); a door without one asks the production policy.
 */
export function authorize(
  operation: OperationShape,
  identity: Identity | undefined,
  options: { planMode?: boolean; authority?: Authority } = {},
) {
  if (!identity) throw new AppError("unauthorized", `${operation.name} needs a signed-in caller`);
  // The authority policy's `operation.call` (server/policy/authority.ts): the kinds the operation
  // names, for a person the least role it declares, for an agent in plan mode only reads.
  const principal = principalOf(identity);
  if (principal.kind === "agent" && options.planMode) principal.planMode = true;
  const decision = (options.authority ?? productionAuthority).authorize(principal, "operation.call", {
    operation: callAbout(operation),
  });
  if (!decision.allowed) throw refusal(operation, identity, decision);
}

/** The error a door answers with for a call the policy refused, saying which rule and why. */
function refusal(operation: OperationShape, identity: Identity, decision: AuthorityDecision): AppError {
  if (decision.rule === "agents-in-plan-mode-read-only") return planModeRefusal(operation.name);
  if (decision.rule === "role-bounds-operations") {
    return new AppError(
      "forbidden",
      `${operation.name} needs the role ${operation.role} or above; ${identity.name} is a ${roleOf(identity)}.`,
      { operation: operation.name, role: roleOf(identity), roleNeeded: operation.role },
    );
  }
  const who = operation.callers.map((kind) => `a ${kind}`).join(" or ");
  return new AppError(
    "forbidden",
    `Only ${who} may call ${operation.name}; ${identity.name} is a caller of kind ${identity.kind}.`,
    { operation: operation.name, callerKind: identity.kind },
  );
}

/** The refusal every door gives an agent in plan mode, with what it may still call. */
export function planModeRefusal(name: string): AppError {
  return new AppError(
    "invalid_state",
    `${name} is not available in plan mode: only read-only tools, ask_user, get_answer, submit_plan and exit_plan_mode are, until a person approves the plan (then your tasks come with status) or you call exit_plan_mode.`,
    { plan_mode: true, allowed: "read-only tools, ask_user, get_answer, submit_plan, exit_plan_mode" },
  );
}

/** `decideCallNow`'s answer as a door gives it: the caller as they stand now, or the refusal. */
async function decidedNow(
  app: Pick<AppContext, "db" | "engine">,
  operation: OperationShape,
  identity: Identity | undefined,
  recheck: boolean,
): Promise<Identity> {
  if (!identity) throw new AppError("unauthorized", `${operation.name} needs a signed-in caller`);
  const decided = await decideCallNow(app.db.pool, app.engine.authority, callAbout(operation), identity, { recheck });
  if (!decided.identity) throw new AppError("unauthorized", "The credential this was opened with has been revoked");
  if (!decided.allowed) throw refusal(operation, decided.identity, decided.decision!);
  return decided.identity;
}

/**
 * `authorize` for a caller whose right was judged earlier (a live stream, a long-lived session):
 * the credential looked up again and the role read again, so a revoked credential or a lowered
 * role stops the next effect rather than the next connection. A delivery reads, so plan mode does
 * not stop it. Returns the caller as they are now.
 */
export async function authorizeNow(
  app: Pick<AppContext, "db" | "engine">,
  operation: Pick<Operation<z.ZodType, z.ZodType>, "name" | "callers" | "role">,
  identity: Identity,
): Promise<Identity> {
  return decidedNow(app, { ...operation, annotations: { readOnly: true } }, identity, true);
}

/**
 * The check every door's call goes through, under the app context's policy, with the caller the
 * door has just proven: their kind and role, and for an agent about to change something whether
 * its plan mode holds it read-only now.
 */
async function authorizeCall(
  operation: OperationShape,
  context: Pick<OperationContext, "app" | "identity">,
): Promise<void> {
  await decidedNow(context.app, operation, context.identity, false);
}

/**
 * Checks the caller, parses the raw input (a clear `invalid_input` naming every bad field, before
 * anything changes), runs the operation for that caller, and returns its output as the output
 * schema shapes it.
 */
export async function invokeOperation<Input extends z.ZodType, Output extends z.ZodType>(
  operation: Operation<Input, Output>,
  context: OperationContext,
  rawInput: unknown,
): Promise<z.output<Output>> {
  await authorizeCall(operation, context);
  const parsed = operation.input.safeParse(rawInput);
  if (!parsed.success) {
    throw new AppError("invalid_input", `Invalid input for ${operation.name}: ${z.prettifyError(parsed.error)}`, {
      issues: parsed.error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })),
    });
  }
  const result = await withCaller(context.identity, () => operation.run(context, parsed.data));
  return operation.output.parse(result);
}

/**
 * The tRPC door's adapter: a procedure body that runs the operation for the caller the door
 * proved, after the same check as `invokeOperation`, and shapes its output the same way. tRPC
 * has already parsed the input with `operation.input`.
 */
export function viaOperation<Input extends z.ZodType, Output extends z.ZodType>(operation: Operation<Input, Output>) {
  return async ({ ctx, input }: { ctx: OperationContext; input: z.output<Input> }): Promise<z.output<Output>> => {
    await authorizeCall(operation, ctx);
    // The output schema shapes the answer here as in every other door: one operation, one shape.
    return operation.output.parse(await withCaller(ctx.identity, () => operation.run(ctx, input)));
  };
}
