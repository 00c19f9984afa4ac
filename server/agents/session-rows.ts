import type { AppContext } from "../services";
import { DEFAULT_AGENT_CONCURRENCY } from "./leases";

/**
 * An agent session's row: its id, made from the goal, and the insert that keeps it unique. Apart
 * from sessions.ts so that a session requested before it exists (session-requests.ts) and one
 * started at once are written the same way, without the two modules importing each other.
 */
type App = Pick<AppContext, "db">;

/** Seed 003's ids read like `user-auth-1678886400`: the goal's first words and the time. */
export function sessionIdFor(goal: string, now: Date): string {
  const words = goal
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9\s-]/g, " ")
    .split(/[\s-]+/)
    .filter(
      (word) =>
        word.length > 1 && !["the", "and", "for", "into", "with", "from", "in", "to", "of", "an"].includes(word),
    )
    .slice(0, 4);
  return `${words.join("-") || "session"}-${Math.floor(now.getTime() / 1000)}`;
}

export async function insertSession(
  app: Pick<App, "db">,
  input: {
    /** The id promised to the agent before the session existed (see session-requests.ts). */
    id?: string;
    goal: string;
    workspaceRoot: string;
    planId: string;
    runId: string;
    actor: string;
    todoKey?: string;
    /** An agent's plan-mode session whose approved plan this session executes. */
    planningSessionId?: string;
    agentConcurrency?: number;
    leaseSeconds?: number;
    /** Bound to its author (`actor`) under this credential: an agent's own approved plan. */
    authorBound?: { credential: string | null };
  },
): Promise<string> {
  const base = input.id ?? sessionIdFor(input.goal, new Date());
  for (let suffix = 1; ; suffix++) {
    const id = suffix === 1 ? base : `${base}-${suffix}`;
    const inserted = await app.db.pool.query(
      `insert into agent_sessions (id, goal, workspace_root, plan_id, run_id, created_by, todo_key, planning_session_id,
         agent_concurrency, lease_seconds, author_bound, author_credential)
       values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, $11::int), coalesce($10, 600), $12, $13)
       on conflict (id) do nothing`,
      [
        id,
        input.goal,
        input.workspaceRoot,
        input.planId,
        input.runId,
        input.actor,
        input.todoKey ?? null,
        input.planningSessionId ?? null,
        input.agentConcurrency ?? null,
        input.leaseSeconds ?? null,
        DEFAULT_AGENT_CONCURRENCY,
        input.authorBound !== undefined,
        input.authorBound?.credential ?? null,
      ],
    );
    if (inserted.rowCount) return id;
  }
}
