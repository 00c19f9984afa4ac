import pg from "pg";

/*
 * What a failed database call means, and what to do about it: whether the connection (not the
 * statement) failed, whether to wait and try again, and — for a commit whose answer was lost with
 * its connection — whether it committed after all.
 */

/**
 * Errors that mean the connection (not the statement) failed: the server restarted or terminated
 * the backend, the network dropped, or the pool could not connect. Work that failed this way did
 * not commit (or, for a commit in flight, may have) and is worth retrying; anything else is not.
 */
export function isConnectionError(error: unknown): boolean {
  if (!(error instanceof Error)) return false;
  const code = (error as { code?: unknown }).code;
  if (typeof code === "string") {
    // 57P01-03: admin shutdown, crash shutdown, cannot connect now; 57P05 and 25P03: the server
    // ended an idle session or one idle in a transaction; 08xxx: connection exceptions.
    if (/^(57P0[1235]|25P03|08...)$/.test(code)) return true;
    if (["ECONNREFUSED", "ECONNRESET", "EPIPE", "ETIMEDOUT", "ENOTFOUND", "EAI_AGAIN"].includes(code)) return true;
  }
  return /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect/i.test(
    error.message,
  );
}

/**
 * The database cannot serve requests right now: the connection failed (see `isConnectionError`),
 * the server refuses new connections (53300 too many clients, 57P03 starting up), or Prisma could
 * not reach it (P1001, P1017) or get a pooled connection in time (P2024). Such a request is worth
 * repeating a little later; doors answer 503 `unavailable`, never an internal error. The error
 * may be wrapped (Prisma's adapter errors, a tRPC error) — its causes are looked at too.
 */
export function isDatabaseUnavailable(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 5; depth++) {
    if (isConnectionError(current)) return true;
    const code =
      (current as { code?: unknown; errorCode?: unknown }).code ?? (current as { errorCode?: unknown }).errorCode;
    if (typeof code === "string" && ["53300", "57P03", "P1001", "P1017", "P2024"].includes(code)) return true;
    if (/too many clients|Can't reach database server/i.test(current.message)) return true;
    current = (current as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * The server refused a new connection because it is full (53300: `max_connections`, or a role's
 * or database's CONNECTION LIMIT): nothing was sent, so any work may simply wait and try again.
 */
export function isServerFull(error: unknown): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === "53300";
}

/** A statement gave up waiting for a lock (lock_timeout): nothing was written; try again later. */
export function isLockTimeout(error: unknown): boolean {
  return error instanceof Error && (error as { code?: unknown }).code === "55P03";
}

/**
 * Retries `work` while it fails for connection reasons, a full server or a lock timeout, with capped exponential
 * backoff, until it succeeds, fails otherwise, or `shouldStop` says the process is going away.
 * `work` must be safe to repeat after a rollback (engine transactions re-check every state they
 * change).
 */
export async function retryOnConnectionLoss<T>(
  work: () => Promise<T>,
  options: {
    shouldStop?: () => boolean;
    onRetry?: (error: unknown, attempt: number) => void;
    maxDelayMs?: number;
  } = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await work();
    } catch (error) {
      if (!(isConnectionError(error) || isServerFull(error) || isLockTimeout(error)) || options.shouldStop?.()) {
        throw error;
      }
      options.onRetry?.(error, attempt);
      await new Promise((resolve) => setTimeout(resolve, Math.min(options.maxDelayMs ?? 2_000, 50 * 2 ** attempt)));
    }
  }
}

/** The server process behind `client` (node-postgres keeps it from the connection's start-up, untyped). */
export function backendPid(client: pg.PoolClient): number | undefined {
  const pid = (client as unknown as { processID?: unknown }).processID;
  return typeof pid === "number" ? pid : undefined;
}

/** A transaction whose commit was sent when its connection broke: its id and the backend that ran it. */
export interface LostCommitSubject {
  xid: string;
  pid: number | undefined;
}

/**
 * Whether the transaction whose commit's answer was lost committed, asked on a new connection
 * made with the pool's settings (waiting out the outage that broke the old one): "committed" or
 * "aborted". PostgreSQL knows the fate of every recent transaction (`pg_xact_status`). One still
 * in progress never received its commit, or its backend has not yet noticed the connection is
 * gone: that backend is ended — only while it still runs this very transaction — which rolls it
 * back, and the fate is asked again. Undecided (`shouldStop`, or an id too old to know) counts as
 * "aborted": the caller then fails as before and recovery finds what happened.
 */
export async function settleLostCommit(
  pool: Pick<pg.Pool, "options">,
  transaction: LostCommitSubject,
  shouldStop?: () => boolean,
): Promise<"committed" | "aborted"> {
  for (let attempt = 1; !shouldStop?.(); attempt++) {
    // A connection of its own, not the pool's: in a cut every pooled connection may be one whose
    // commit's answer was lost, each held while it waits here for another.
    const client = new pg.Client({ ...pool.options });
    client.on("error", () => undefined);
    try {
      await client.connect();
      const asked = await client.query<{ status: string | null }>("select pg_xact_status($1::xid8) as status", [
        transaction.xid,
      ]);
      const status = asked.rows[0]?.status;
      if (status === "committed") return "committed";
      if (status !== "in progress") return "aborted";
      if (transaction.pid !== undefined) {
        await client.query(
          `select pg_terminate_backend(pid) from pg_stat_activity
            where pid = $1 and backend_xid is not null
              and backend_xid::text::bigint = ($2::text::numeric % 4294967296)::bigint`,
          [transaction.pid, transaction.xid],
        );
      }
    } catch (error) {
      if (!isDatabaseUnavailable(error)) throw error;
    } finally {
      await client.end().catch(() => undefined);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, 25 * 2 ** attempt)));
  }
  return "aborted";
}
