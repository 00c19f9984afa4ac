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
  const sessionId = await insertSession(app, {
    goal: origin.goal,
    workspaceRoot: input.workspaceRoot,
    planId: input.planId,
    runId: input.runId,
    actor: origin.actor,
    planningSessionId: origin.id,
  });
  await recordAudit(app.db.pool, {
    actor: input.approvedBy,
    action: "agent_session.attached",
    planId: input.planId,
    planVersion: input.version,
    runId: input.runId,
    detail: { sessionId, agent: origin.actor, planningSessionId: origin.id },
  });
  return { sessionId };
}
