import type pg from "pg";
import type { Identity } from "../identity";
import { sqlTextArray } from "../db";
import { OPEN_PLANNING_STATUSES } from "../vocabulary";

/**
 * Seed 002's plan mode belongs to the agent, not to one MCP connection: the agent is its name
 * under the credential that proved it (a named agent credential, or the shared agent token, whose
 * holders tell themselves apart by name). While that agent's planning session gathers, waits for
 * an answer, or waits for the person's review of its submitted plan, every connection of the
 * agent and its CLI are restricted to reading (server/policy/authority.ts,
 * `agents-in-plan-mode-read-only`). The state is the planning session's row, so it survives a
 * restart and every server process agrees on it.
 */
type Db = Pick<pg.ClientBase, "query">;

export interface PlanModeOwner {
  name: string;
  /** The named credential's id; null for the shared agent token. */
  credential: string | null;
}

export function planModeOwnerOf(identity: Pick<Identity, "name" | "tokenId">): PlanModeOwner {
  return { name: identity.name, credential: identity.tokenId ?? null };
}

/**
 * SQL over `planning_sessions s`: the session holds its agent in plan mode (read-only) now — while
 * it gathers or waits for an answer, and while its submitted plan waits for the person's review.
 * It ends when a person approves (the agent then executes), rejects or cancels, when it times out,
 * or when the agent exits.
 */
export const HOLDS_PLAN_MODE = `(s.status = any(${sqlTextArray(OPEN_PLANNING_STATUSES)})
  or (s.status = 'completed' and s.plan_id is not null and s.plan_mode_left_at is null
      and not exists (select 1 from runs r where r.plan_id = s.plan_id and r.plan_version >= s.result_version)))`;

export const OWNED_BY = `s.kind = 'external' and s.actor = $1 and s.actor_credential is not distinct from $2`;

/**
 * The planning session that holds this agent in plan mode now, if any (the latest, should an agent
 * have entered twice): what every door asks before letting the agent change anything.
 */
export async function planModeOf(db: Db, owner: PlanModeOwner): Promise<string | undefined> {
  const rows = await db.query<{ id: string }>(
    `select s.id from planning_sessions s where ${OWNED_BY} and ${HOLDS_PLAN_MODE}
     order by s.created_at desc limit 1`,
    [owner.name, owner.credential],
  );
  return rows.rows[0]?.id;
}
