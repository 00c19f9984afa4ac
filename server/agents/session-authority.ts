import type { AppContext } from "../services";
import { actorKindOf } from "../caller-context";
import { AppError } from "../errors";
import { principalNow } from "../policy/facts";
import type { SessionRow } from "./sessions";

/**
 * Whether this agent may take a session's tasks (`status`) or report on them (`update`), asked of
 * the one policy (`session.work`, server/policy/authority.ts) at each such call — never when the
 * session was attached or a connection opened — with the agent as it stands now (a revoked
 * principal does nothing) and the credential that proved this call. A session attached from an
 * agent's own approved plan (plan_create) is that author's: the same name under the same
 * credential. People work sessions through the operations their role allows.
 */
export async function authorizeSessionWork(
  app: Pick<AppContext, "db" | "engine">,
  session: Pick<SessionRow, "id" | "plan_id" | "created_by" | "author_bound" | "author_credential">,
  caller: string | undefined,
  credential: string | null | undefined,
): Promise<void> {
  if (caller === undefined || actorKindOf(caller) !== "agent") return;
  const principal = await principalNow(app.db.pool, caller, "agent");
  const decision = app.engine.authority.authorize(
    principal.kind === "agent" ? { ...principal, credential: credential ?? null } : principal,
    "session.work",
    session.author_bound ? { boundTo: { name: session.created_by, credential: session.author_credential } } : {},
  );
  if (decision.allowed) return;
  throw new AppError(
    "forbidden",
    session.author_bound && decision.rule === undefined
      ? `Session ${session.id} works plan ${session.plan_id}, which the agent ${session.created_by} wrote: only that agent, under the credential it wrote the plan with, takes or reports its tasks.`
      : `Session ${session.id}: ${decision.reason}`,
    { session: session.id, rule: decision.rule ?? null },
  );
}
