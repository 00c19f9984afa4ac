import type { AppContext } from "../services";
import { AppError } from "../errors";
import { roleOf, type Identity } from "../identity";
import { currentIdentity } from "../people/principals";
import { markDelivered, messageForContext, undeliveredMessages } from "../planner/messages";
import { planModeOf, planModeOwnerOf } from "../policy/plan-mode-fact";
import { touchPlanMode } from "../planner/plan-mode-timers";
import { abandonTodoPlan, todoKeyFor } from "../agents/todo-plans";
import { touchTodoOf } from "../agents/todo-durability";
import { roleAtLeast, type Role } from "../vocabulary";

/**
 * What the MCP door does around its caller's calls, beside the operations it adapts: the
 * connection's own bookkeeping, never a use case of its own. Each acts only on the caller's own
 * things — its credential as it is now, its plan mode, its connection's todo plan — so the
 * caller's identity is the authority it needs; what the caller asks for goes through an operation.
 */
type App = Pick<AppContext, "db">;

/**
 * The caller as they are at this call, not as they were when the connection opened: the
 * credential is looked up again (revoked: unauthorized) and a person's role read again, which must
 * reach `needs`. A connection lives for an hour; authority is decided at each use.
 */
export async function callerNow(app: App, identity: Identity, needs: Role, what: string): Promise<Identity> {
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

/** Who holds plan mode: the caller's name under its credential; connections of one holder follow each other. */
export function planModeHolderKey(identity: Pick<Identity, "name" | "tokenId">): string {
  const owner = planModeOwnerOf(identity);
  return `${owner.name}\u0000${owner.credential ?? ""}`;
}

/** The planning session holding the caller in plan mode now, if any (server/policy/plan-mode-fact.ts). */
export function planModeOfCaller(app: App, identity: Pick<Identity, "name" | "tokenId">): Promise<string | undefined> {
  return planModeOf(app.db.pool, planModeOwnerOf(identity));
}

/** A call in plan mode shows the agent is still there: the gathering idle timer starts again. */
export async function heardFromPlanMode(app: App, planningSessionId: string): Promise<void> {
  await touchPlanMode(app.db.pool, planningSessionId);
}

/**
 * Seed 002: a person's messages during planning join the agent's context — they come with the
 * answer to the agent's next call, as text, and are then marked delivered.
 */
export async function takePersonMessages(app: App, planningSessionId: string): Promise<string[]> {
  const incoming = await undeliveredMessages(app.db.pool, planningSessionId);
  if (incoming.length === 0) return [];
  await markDelivered(
    app.db.pool,
    incoming.map((message) => message.id),
  );
  return incoming.map(messageForContext);
}

/** The connection was used: its todo plan's idle time starts again (server/agents/todo-durability.ts). */
export function todoConnectionUsed(app: App, connectionId: string): Promise<void> {
  return touchTodoOf(app.db.pool, connectionId);
}

/** An ended connection takes its seed 000 todo plan with it (server/agents/todo-plans.ts). */
export async function todoConnectionEnded(
  app: Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">,
  input: { identity: Identity; connectionId: string; why: string },
): Promise<void> {
  await abandonTodoPlan(app, todoKeyFor(input.identity, input.connectionId), input.why);
}
