import type pg from "pg";
import type { Identity } from "../identity";

/**
 * The MCP door's sessions, in the database (`mcp_sessions`) rather than one web process's memory:
 * whichever process behind the proxy receives a session's next request finds it here, and a
 * process stopping ends none. This is the transport's own state (who opened the session, what the
 * client said at `initialize`, when it was last used) — what the caller may do is not stored: each
 * tool call looks the credential up again (server/mcp/server.ts).
 *
 * Closing is a claim: `closed_at` is set by exactly one statement, and only the process whose
 * statement set it ends what goes with the session (its todo plan), so two processes sweeping at
 * once never end it twice.
 */
type Pool = Pick<pg.Pool, "query">;

export interface StoredSession {
  identity: Identity;
  /** The params of the client's initialize request. */
  initialize: Record<string, unknown>;
}

/** What proved the identity — the credential, not the name an agent gives itself. */
export function credentialOf(identity: Pick<Identity, "kind" | "tokenId">): string {
  return `${identity.kind}:${identity.tokenId ?? ""}`;
}

export async function recordSession(
  pool: Pool,
  session: { id: string; identity: Identity; initialize: Record<string, unknown> },
): Promise<void> {
  await pool.query(
    `insert into mcp_sessions (id, identity_kind, identity_name, token_id, credential, initialize)
     values ($1, $2, $3, $4, $5, $6)`,
    [
      session.id,
      session.identity.kind,
      session.identity.name,
      session.identity.tokenId ?? null,
      credentialOf(session.identity),
      JSON.stringify(session.initialize),
    ],
  );
}

interface SessionRow {
  identity_kind: Identity["kind"];
  identity_name: string;
  token_id: string | null;
  initialize: Record<string, unknown>;
}

/**
 * The open session `id`, marked as used now — or undefined when it never existed, was closed, or
 * went unused for `idleMs` (then it is as good as closed: the next sweep closes it).
 */
export async function useSession(pool: Pool, id: string, idleMs: number): Promise<StoredSession | undefined> {
  const found = await pool.query<SessionRow>(
    `update mcp_sessions set last_seen_at = now()
     where id = $1 and closed_at is null
       and last_seen_at >= now() - make_interval(secs => $2::double precision / 1000)
     returning identity_kind, identity_name, token_id, initialize`,
    [id, idleMs],
  );
  const row = found.rows[0];
  if (!row) return undefined;
  return {
    identity: {
      kind: row.identity_kind,
      name: row.identity_name,
      ...(row.token_id !== null && { tokenId: row.token_id }),
    },
    initialize: row.initialize,
  };
}

/** Whether `id` is open and in use (not idle for `idleMs`). */
export async function sessionIsOpen(pool: Pool, id: string, idleMs: number): Promise<boolean> {
  const found = await pool.query(
    `select 1 from mcp_sessions where id = $1 and closed_at is null
       and last_seen_at >= now() - make_interval(secs => $2::double precision / 1000)`,
    [id, idleMs],
  );
  return (found.rowCount ?? 0) > 0;
}

/** Of `ids`, those still open: a process drops what it holds of the others. */
export async function openSessionsAmong(pool: Pool, ids: string[]): Promise<Set<string>> {
  if (ids.length === 0) return new Set();
  const found = await pool.query<{ id: string }>(
    "select id from mcp_sessions where id = any($1::text[]) and closed_at is null",
    [ids],
  );
  return new Set(found.rows.map((row) => row.id));
}

export interface ClosedSession {
  id: string;
  identity: Identity;
}

function closedFrom(rows: (SessionRow & { id: string })[]): ClosedSession[] {
  return rows.map((row) => ({
    id: row.id,
    identity: {
      kind: row.identity_kind,
      name: row.identity_name,
      ...(row.token_id !== null && { tokenId: row.token_id }),
    },
  }));
}

/** Closes `id` if it is open; returns it when this call closed it. */
export async function closeSession(pool: Pool, id: string, reason: string): Promise<ClosedSession | undefined> {
  const closed = await pool.query<SessionRow & { id: string }>(
    `update mcp_sessions set closed_at = now(), closed_reason = $2 where id = $1 and closed_at is null
     returning id, identity_kind, identity_name, token_id, initialize`,
    [id, reason],
  );
  return closedFrom(closed.rows)[0];
}

/**
 * Keeps at most `keep` open sessions of `credential` (the newest `newest` among them): closes the
 * least recently used others and returns them.
 */
export async function closeBeyond(
  pool: Pool,
  input: { credential: string; keep: number; newest: string; reason: string },
): Promise<ClosedSession[]> {
  const closed = await pool.query<SessionRow & { id: string }>(
    `update mcp_sessions set closed_at = now(), closed_reason = $4
     where id in (
       select id from mcp_sessions where credential = $1 and closed_at is null and id <> $3
       order by last_seen_at desc, created_at desc offset $2
     ) and closed_at is null
     returning id, identity_kind, identity_name, token_id, initialize`,
    [input.credential, Math.max(0, input.keep - 1), input.newest, input.reason],
  );
  return closedFrom(closed.rows);
}

/** Closes every session unused for `idleMs` and returns them. */
export async function closeIdle(pool: Pool, idleMs: number, reason: string): Promise<ClosedSession[]> {
  const closed = await pool.query<SessionRow & { id: string }>(
    `update mcp_sessions set closed_at = now(), closed_reason = $2
     where closed_at is null and last_seen_at < now() - make_interval(secs => $1::double precision / 1000)
     returning id, identity_kind, identity_name, token_id, initialize`,
    [idleMs, reason],
  );
  return closedFrom(closed.rows);
}

/** Forgets sessions closed more than `keepMs` ago, so the table holds open sessions and recent ones. */
export async function forgetClosed(pool: Pool, keepMs: number): Promise<number> {
  const removed = await pool.query(
    "delete from mcp_sessions where closed_at < now() - make_interval(secs => $1::double precision / 1000)",
    [keepMs],
  );
  return removed.rowCount ?? 0;
}
