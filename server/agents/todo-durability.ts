import type pg from "pg";
import type { AppContext } from "../services";
import { recordAudit } from "../audit/audit-log";
import { cancelRun } from "../engine/engine";
import { AppError } from "../errors";
import { logger } from "../logger";

/**
 * Seed 000's todo plans outlive the MCP connection they are keyed by. A connection (an MCP
 * session, stored in the database and served by any web process) survives a server restart; it
 * can still be lost without a word from the client — its record gone, or never written by a
 * server that kept sessions in memory. Its todo plan is then either
 * - resumed: the same agent (same name, same credential) calls a planning tool on a new
 *   connection that has no plan yet — the plan of its connection that is gone moves to the new
 *   one (audited `todo.resumed`), or
 * - ended: nobody called on it for the idle limit (`STEPWISE_MCP_TODO_IDLE_TIMEOUT_MS`, an hour as
 *   an MCP session's own idle limit) — the worker's sweep cancels its run with that reason
 *   (audited `todo.abandoned`), so no todo run stays running for ever.
 */
type App = Pick<AppContext, "db" | "engine">;
type Env = Record<string, string | undefined>;

export function todoIdleLimitMs(env: Env = process.env): number {
  const raw = env.STEPWISE_MCP_TODO_IDLE_TIMEOUT_MS;
  if (raw === undefined || raw === "") return 60 * 60_000;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) {
    throw new Error(`STEPWISE_MCP_TODO_IDLE_TIMEOUT_MS must be a positive integer, got "${raw}"`);
  }
  return value;
}

/** The connection was used: its todo plan's idle time starts again. */
export async function touchTodoOf(pool: Pick<pg.Pool, "query">, mcpSessionId: string): Promise<void> {
  await pool.query("update agent_sessions set last_seen_at = now() where todo_mcp_session = $1 and closed_at is null", [
    mcpSessionId,
  ]);
}

/**
 * The new connection `key` has no plan yet: the agent's latest open todo plan whose connection is
 * gone (`isLive` says no: no process serves it any more) becomes this connection's. Returns
 * whether one was resumed.
 */
export async function resumeTodoPlan(
  app: App,
  input: {
    key: string;
    ownerPrefix: string;
    mcpSessionId: string;
    actor: string;
    isLive: (id: string) => boolean | Promise<boolean>;
  },
): Promise<boolean> {
  const mine = await app.db.pool.query("select 1 from agent_sessions where todo_key = $1", [input.key]);
  if (mine.rowCount) return false;
  const candidates = await app.db.pool.query<{ id: string; plan_id: string; run_id: string; todo_mcp_session: string }>(
    `select id, plan_id, run_id, todo_mcp_session from agent_sessions
     where todo_mcp_session is not null and todo_mcp_session <> $2 and closed_at is null
       and left(todo_key, length($1)) = $1
     order by created_at desc`,
    [input.ownerPrefix, input.mcpSessionId],
  );
  let orphan: (typeof candidates.rows)[number] | undefined;
  for (const row of candidates.rows) {
    if (await input.isLive(row.todo_mcp_session)) continue;
    orphan = row;
    break;
  }
  if (!orphan) return false;
  const moved = await app.db.pool.query(
    `update agent_sessions set todo_key = $2, todo_mcp_session = $3, last_seen_at = now()
     where id = $1 and todo_mcp_session = $4 and closed_at is null`,
    [orphan.id, input.key, input.mcpSessionId, orphan.todo_mcp_session],
  );
  // Another new connection of the agent took it in the same instant: that one has it.
  if (!moved.rowCount) return false;
  await recordAudit(app.db.pool, {
    actor: input.actor,
    action: "todo.resumed",
    planId: orphan.plan_id,
    runId: orphan.run_id,
    detail: {
      sessionId: orphan.id,
      previousMcpSession: orphan.todo_mcp_session,
      mcpSession: input.mcpSessionId,
      reason:
        "its MCP connection ended without closing (a server restart); a new connection of the same agent resumed it",
    },
  });
  return true;
}

/**
 * Todo plans nobody called on for the idle limit end: each is claimed (closed) first, so one
 * worker ends it, then its run is cancelled and the reason audited.
 */
export async function sweepIdleTodos(app: App, limitMs = todoIdleLimitMs()): Promise<number> {
  const claimed = await app.db.pool.query<{ id: string; plan_id: string; run_id: string }>(
    `update agent_sessions set closed_at = now()
     where todo_mcp_session is not null and closed_at is null
       and coalesce(last_seen_at, created_at) < now() - make_interval(secs => $1::double precision / 1000)
     returning id, plan_id, run_id`,
    [limitMs],
  );
  const reason = `No call on its MCP connection for ${Math.round(limitMs / 1000)} seconds (the connection ended, or the server restarted and the agent did not come back); the todo run was cancelled.`;
  for (const todo of claimed.rows) {
    let cancelled = false;
    try {
      await cancelRun(app.engine, { runId: todo.run_id, actor: "stepwise", reason });
      await app.db.pool.query("update runs set reason = $2 where id = $1 and status = 'cancelled'", [
        todo.run_id,
        reason,
      ]);
      cancelled = true;
    } catch (error) {
      // Finished already (or in the same instant): nothing left running.
      if (!(error instanceof AppError)) {
        logger.error({ err: error, runId: todo.run_id }, "could not cancel an idle todo run");
      }
    }
    await recordAudit(app.db.pool, {
      actor: "stepwise",
      action: "todo.abandoned",
      planId: todo.plan_id,
      runId: todo.run_id,
      detail: { sessionId: todo.id, reason, runCancelled: cancelled, idle: true },
    });
  }
  return claimed.rowCount ?? 0;
}
