import type pg from "pg";
import { OWNED_BY, planModeOf, type PlanModeOwner } from "../policy/plan-mode-fact";

/*
 * Which planning session an agent's plan-mode tools work on. Whether plan mode holds an agent
 * read-only is a fact the policy reads at the moment of effect: server/policy/plan-mode-fact.ts.
 */
type Db = Pick<pg.ClientBase, "query">;

/**
 * The agent's planning session the plan-mode tools work on when the call names none: the one
 * holding it in plan mode, else its latest one — open to a resubmission (a plan sent back for
 * changes after the agent left plan mode), or ended, so the tool says why (cancelled by the
 * person, timed out) — whichever connection, before or after a restart, entered it.
 */
export async function currentPlanningSessionOf(db: Db, owner: PlanModeOwner): Promise<string | undefined> {
  const held = await planModeOf(db, owner);
  if (held) return held;
  const rows = await db.query<{ id: string }>(
    `select s.id from planning_sessions s where ${OWNED_BY} order by s.created_at desc limit 1`,
    [owner.name, owner.credential],
  );
  return rows.rows[0]?.id;
}
