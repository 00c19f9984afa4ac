import type { AppContext } from "../services";
import { recordAudit } from "../audit/audit-log";
import { insertSession } from "./session-rows";

/**
 * Seed 002's "approve → proceed to execution" for an agent's plan: the run a person started from a
 * plan an agent submitted in plan mode becomes that agent's session (seed 003), so the same
 * agent's next `status` is handed the tasks in dependency order and its `update` reports on them.
 * Plans from anywhere else are left alone. Idempotent: a run already attached keeps its session.
 */
export async function attachApprovedPlan(
  app: Pick<AppContext, "db">,
  input: { planId: string; version: number; runId: string; workspaceRoot: string; approvedBy: string },
): Promise<{ sessionId: string } | null> {
  const planning = await app.db.pool.query<{ id: string; actor: string; goal: string }>(
    `select id, actor, goal from planning_sessions
     where plan_id = $1 and kind = 'external' and status = 'completed'
     order by created_at desc limit 1`,
    [input.planId],
  );
  const origin = planning.rows[0];
  if (!origin) return null;
  const existing = await app.db.pool.query<{ id: string }>("select id from agent_sessions where run_id = $1", [
    input.runId,
  ]);
  if (existing.rows[0]) return { sessionId: existing.rows[0].id };
  return attachSession(
    app,
    input,
    { goal: origin.goal, actor: origin.actor, planningSessionId: origin.id },
    { planningSessionId: origin.id },
  );
}

type AttachInput = Parameters<typeof attachApprovedPlan>[1];

/** The run's session, and the audit entry saying whose approval attached it to which agent. */
async function attachSession(
  app: Pick<AppContext, "db">,
  input: AttachInput,
  session: Omit<Parameters<typeof insertSession>[1], "workspaceRoot" | "planId" | "runId">,
  detail: Record<string, unknown>,
): Promise<{ sessionId: string }> {
  const sessionId = await insertSession(app, {
    ...session,
    workspaceRoot: input.workspaceRoot,
    planId: input.planId,
    runId: input.runId,
  });
  await recordAudit(app.db.pool, {
    actor: input.approvedBy,
    action: "agent_session.attached",
    planId: input.planId,
    planVersion: input.version,
    runId: input.runId,
    detail: { sessionId, agent: session.actor, ...detail },
  });
  return { sessionId };
}

/**
 * Issue 40's agent door: a plan an agent wrote itself (`plan_create`, version 1 by that agent)
 * whose approved version has agent tasks becomes that agent's session when a person approves it,
 * so the agent's `status` hands it the tasks (fan-out instances each on their own) and its
 * `update` reports them. The session is bound to the author — name and the credential that wrote
 * the plan — and the policy is asked at each `status` and `update` whether the caller is that
 * agent (session-authority.ts), not here. Plans that are already a session's (plan mode, `start`,
 * a todo list, a requested session) are left to their own attachment; each run is attached once.
 */
export async function attachAuthorsPlan(
  app: Pick<AppContext, "db">,
  input: AttachInput,
): Promise<{ sessionId: string } | null> {
  const origin = await app.db.pool.query<{ author: string; author_credential: string | null; goal: string }>(
    `select first.author, first.author_credential, approved.goal
       from plan_versions first join plan_versions approved on approved.plan_id = first.plan_id and approved.version = $2
      where first.plan_id = $1 and first.version = 1 and first.source = 'agent'
        and approved.steps @> '[{"tool": "agent_task"}]'::jsonb
        and not exists (select 1 from agent_sessions s where s.plan_id = $1 and (not s.author_bound or s.run_id = $3))
        and not exists (select 1 from agent_session_requests r where r.plan_id = $1)
        and not exists (select 1 from planning_sessions p where p.plan_id = $1)`,
    [input.planId, input.version, input.runId],
  );
  const plan = origin.rows[0];
  if (!plan) return null;
  return attachSession(
    app,
    input,
    { goal: plan.goal, actor: plan.author, authorBound: { credential: plan.author_credential } },
    { authorBound: true },
  );
}
