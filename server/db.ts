import { PrismaPg } from "@prisma/adapter-pg";
import { createHash } from "node:crypto";
import pg from "pg";
import { idleInTransactionMs, intFromEnv } from "./env";
import { PrismaClient } from "./generated/prisma/client";

/**
 * The two ways the server talks to PostgreSQL: Prisma for plan CRUD, and a plain pg pool for
 * the engine's hot path (row locks, job enqueueing and NOTIFY inside one short transaction).
 */
export interface Database {
  url: string;
  prisma: PrismaClient;
  pool: pg.Pool;
  close(): Promise<void>;
}

/**
 * How long an engine statement waits for a row lock before its transaction is rolled back and
 * tried again (see `inTransaction`). Engine transactions hold their locks for milliseconds; one
 * that waits longer is behind a stalled holder, and waiting while holding its own locks only
 * spreads the stall.
 */
export const LOCK_TIMEOUT_MS = 2_000;

/** STEPWISE_LOCK_TIMEOUT_MS, or `LOCK_TIMEOUT_MS`: tests shorten it to provoke retried transactions. */
export function lockTimeoutMs(): number {
  return intFromEnv("STEPWISE_LOCK_TIMEOUT_MS", LOCK_TIMEOUT_MS);
}

/** The default of STEPWISE_DB_CONNECTIONS: two workers and a server fit PostgreSQL's default 100. */
export const DEFAULT_CONNECTION_BUDGET = 30;

/**
 * How one process's connection budget (STEPWISE_DB_CONNECTIONS) is shared out. Every process has
 * the event bus's LISTEN connection; a worker also its cancel listener and its heartbeat's own
 * connection. graphile-worker's pool needs few (jobs hold no connection while they run: only
 * fetching and completing them, and its LISTEN, do), Prisma serves plan CRUD; the engine's pool,
 * the hot path, gets the rest.
 */
export interface ConnectionBudget {
  total: number;
  /** LISTEN connections and the heartbeat: one each. */
  dedicated: number;
  engine: number;
  prisma: number;
  queue: number;
}

export function connectionBudget(options: { total?: number; worker: boolean }): ConnectionBudget {
  const total = options.total ?? intFromEnv("STEPWISE_DB_CONNECTIONS", DEFAULT_CONNECTION_BUDGET);
  const dedicated = options.worker ? 3 : 1;
  const minimum = dedicated + 4 + 2 + (options.worker ? 2 : 0);
  if (total < minimum) {
    throw new Error(`STEPWISE_DB_CONNECTIONS must be at least ${minimum} for this process, got ${total}`);
  }
  const shared = total - dedicated;
  const queue = options.worker ? Math.max(2, Math.floor(shared / 5)) : 0;
  const prisma = Math.max(2, Math.floor(shared / 5));
  return { total, dedicated, queue, prisma, engine: shared - queue - prisma };
}

export function connectDatabase(url: string, options: { poolSize?: number; prismaPoolSize?: number } = {}): Database {
  const pool = createPool(url, {
    max: options.poolSize ?? 20,
    applicationName: "stepwise",
    lockTimeoutMs: lockTimeoutMs(),
    prepareStatements: true,
  });
  const prisma = new PrismaClient({
    adapter: new PrismaPg({
      connectionString: url,
      max: options.prismaPoolSize ?? 10,
      idle_in_transaction_session_timeout: idleInTransactionMs(),
    }),
  });
  return {
    url,
    prisma,
    pool,
    async close() {
      await prisma.$disconnect();
      await pool.end();
    },
  };
}

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
 * At most this many distinct statement texts are prepared (per connection, the same ones): SQL
 * built with varying text beyond it runs unprepared, so no connection collects statements without
 * bound.
 */
const MAX_PREPARED_STATEMENTS = 300;
const preparedNames = new Map<string, string>();

/** The prepared statement name for `text`, or undefined once the bound is reached. */
/**
 * Forgets which texts have names. Nothing prepared is lost: a name is a hash of its text, so a text
 * gets the same name again. For a test that shares its process with many others, which together
 * name more texts than the cap.
 */
export function forgetPreparedStatementNames(): void {
  preparedNames.clear();
}

export function preparedStatementName(text: string): string | undefined {
  let name = preparedNames.get(text);
  if (name === undefined && preparedNames.size < MAX_PREPARED_STATEMENTS) {
    name = `stepwise_${createHash("sha1").update(text).digest("hex").slice(0, 20)}`;
    preparedNames.set(text, name);
  }
  return name;
}

/**
 * A client that prepares each parameterized statement the first time a connection runs it and
 * afterwards only binds and executes it. node-postgres otherwise sends every statement unnamed,
 * and PostgreSQL parses and plans it again each time: for the engine's statements (CTEs over
 * JSON record sets) planning cost more than executing — a 200-step chain ran a third faster
 * prepared. Only statements with parameters are named (their text is the code's, the values
 * vary); the name is a hash of the text, so one text always gets one name.
 */
export class PreparingClient extends pg.Client {
  /** The text this connection prepared as `name`, once PostgreSQL confirmed it (pg's own record). */
  parsedStatementText(name: string): string | undefined {
    return (this as unknown as { connection?: { parsedStatements?: Record<string, string> } }).connection
      ?.parsedStatements?.[name];
  }

  // pg's overloads (callbacks, submittables, config objects) pass through untouched.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  override query(...args: any[]): any {
    const [text, values, callback] = args;
    if (typeof text === "string" && Array.isArray(values) && values.length > 0 && args.length <= 3) {
      const name = preparedStatementName(text);
      // pg-pool's own query() passes a callback; a checked-out client's caller usually does not.
      if (name && typeof callback === "function") return super.query({ name, text, values }, callback);
      if (name && callback === undefined) return super.query({ name, text, values });
    }
    return (super.query as (...a: unknown[]) => unknown)(...args);
  }
}

/**
 * A pool that rides out a flaky database: an idle client losing its connection (server restart)
 * does not crash the process, a connection attempt that hangs (a backend terminated during the
 * handshake) fails after a while instead of never, and so does a statement whose connection died
 * silently. Engine statements are short; a minute is far beyond any of them. A session left idle
 * inside a transaction (its process frozen) is ended by the server after `idleInTransactionMs`,
 * which releases its locks; with `lockTimeoutMs` a statement stops waiting for a lock.
 */
export function createPool(
  url: string,
  options: {
    max: number;
    applicationName: string;
    lockTimeoutMs?: number;
    idleInTransactionMs?: number;
    /** Prepare parameterized statements once per connection (`PreparingClient`). */
    prepareStatements?: boolean;
  },
): pg.Pool {
  const pool = new pg.Pool({
    ...(options.prepareStatements && { Client: PreparingClient }),
    connectionString: url,
    max: options.max,
    application_name: options.applicationName,
    connectionTimeoutMillis: 10_000,
    query_timeout: 60_000,
    idle_in_transaction_session_timeout: options.idleInTransactionMs ?? idleInTransactionMs(),
    ...(options.lockTimeoutMs && { lock_timeout: options.lockTimeoutMs }),
  });
  pool.on("error", () => undefined);
  // A checked-out client whose connection dies emits 'error' on itself: never unhandled.
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}

/** A statement and its parameters, built by one module and sent by another. */
export interface Statement {
  text: string;
  values: unknown[];
}

/**
 * Ends the transaction with `statements` (each without parameters: see `preparedExecute`) and its
 * commit in one round trip; answers with their results. A statement that fails aborts the
 * transaction and the commit never runs: `inTransaction` then rolls back as for any error.
 */
export type CommitWith = (statements: string[]) => Promise<pg.QueryResult[]>;

/**
 * Runs `statements` (without parameters) as one simple-protocol query: one round trip, run in
 * order, each with a snapshot of its own as usual, the first failure skipping the rest. A
 * multi-statement query answers with one result per statement.
 */
async function multiStatement(client: pg.PoolClient, statements: string[]): Promise<pg.QueryResult[]> {
  const results = (await client.query(statements.join(";\n"))) as unknown as pg.QueryResult | pg.QueryResult[];
  return Array.isArray(results) ? results : [results];
}

/**
 * `text` with `values` as an `execute` of the statement this connection has already prepared for
 * it (`PreparingClient`), so that it can go in one round trip with others (simple protocol, which
 * has no parameters) and still skip planning. Undefined when the connection has not prepared it
 * (the caller runs it normally, which prepares it for next time).
 *
 * Every value is written as a quoted literal, which PostgreSQL reads as the parameter's type
 * fixed when the statement was prepared, exactly as a bound parameter's text. The driver's literal
 * escaping is exact under `standard_conforming_strings` (on since PostgreSQL 9.1) and, for
 * backslashes, writes the `E''` form that is exact either way. Only strings, finite numbers,
 * booleans, null and arrays of strings (in array syntax, as the driver sends them) are accepted:
 * anything else is a programming error.
 */
export function preparedExecute(client: pg.ClientBase, text: string, values: readonly unknown[]): string | undefined {
  if (!(client instanceof PreparingClient) || values.length === 0) return undefined;
  const name = preparedStatementName(text);
  if (!name || client.parsedStatementText(name) !== text) return undefined;
  const literals = values.map((value, index) => {
    if (value === null || value === undefined) return "null";
    if (typeof value === "string") return pg.escapeLiteral(value);
    if (typeof value === "boolean" || (typeof value === "number" && Number.isFinite(value))) return `'${value}'`;
    if (Array.isArray(value) && value.every((item) => typeof item === "string")) {
      return pg.escapeLiteral(textArrayLiteral(value as string[]));
    }
    throw new Error(`Parameter $${index + 1} cannot be written as a literal: ${typeof value}`);
  });
  return `execute ${name}(${literals.join(", ")})`;
}

/** A text array in PostgreSQL's array syntax: every element double-quoted, `"` and `\\` escaped. */
function textArrayLiteral(items: string[]): string {
  return `{${items.map((item) => `"${item.replace(/["\\]/g, (c) => `\\${c}`)}"`).join(",")}}`;
}

/**
 * Runs `work` in one transaction on a pooled client. A client whose connection dies while checked
 * out emits 'error' on itself, not on the pool: without a handler that kills the process. The
 * broken client is destroyed rather than returned to the pool. A transaction that gave up waiting
 * for a lock (the pool's lock_timeout) has rolled back, releasing its own locks, and is run again
 * after a pause: `work` must be safe to repeat, as engine transactions are (they re-read what
 * they change).
 */
export async function inTransaction<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient, opened: pg.QueryResult[] | undefined, commitWith: CommitWith) => Promise<T>,
  options: {
    /**
     * Statements sent in the same round trip as `begin` (as `preparedExecute`s, once the
     * connection has prepared them; until then one after the other): PostgreSQL's simple protocol
     * runs them in order in the new transaction, each with a snapshot of its own as usual. Their
     * results are `work`'s second argument.
     */
    openWith?: Statement[];
  } = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inTransactionOnce(pool, work, options.openWith);
    } catch (error) {
      if (!isLockTimeout(error)) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(1_000, 25 * 2 ** attempt)));
    }
  }
}

async function inTransactionOnce<T>(
  pool: pg.Pool,
  work: (client: pg.PoolClient, opened: pg.QueryResult[] | undefined, commitWith: CommitWith) => Promise<T>,
  openWith: Statement[] | undefined,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => (broken = error);
  client.on("error", onError);
  let committed = false;
  const commitWith: CommitWith = async (statements) => {
    if (committed) throw new Error("This transaction has already committed");
    const results = await multiStatement(client, [...statements, "commit"]);
    committed = true;
    return results.slice(0, -1);
  };
  try {
    let opened: pg.QueryResult[] | undefined;
    const executes = openWith?.map((statement) => preparedExecute(client, statement.text, statement.values));
    if (executes?.every((execute) => execute !== undefined)) {
      opened = (await multiStatement(client, ["begin", ...(executes as string[])])).slice(1);
    } else {
      await client.query("begin");
      // The first time on this connection: each statement on its own, which prepares it.
      if (openWith) {
        opened = [];
        for (const statement of openWith) opened.push(await client.query(statement.text, statement.values));
      }
    }
    const result = await work(client, opened, commitWith);
    if (!committed) await client.query("commit");
    return result;
  } catch (error) {
    if (isConnectionError(error)) broken ??= error as Error;
    // Nothing to roll back once committed (no statement follows the commit in `commitWith`).
    if (!broken && !committed) await client.query("rollback").catch(() => undefined);
    throw error;
  } finally {
    client.off("error", onError);
    client.release(broken ?? false);
  }
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

/**
 * Options for Prisma's interactive transactions. Its defaults (2 s to get a connection, 5 s for
 * the whole transaction) are shorter than a busy machine needs for a plan save of a few short
 * statements; timed out, the save fails for a person who already answered every question.
 */
/**
 * A set of the vocabulary's words as an SQL array constant (`'{a,b}'::text[]`), for a statement
 * that cannot take one more parameter (a shared SQL fragment, the engine's write-back). Only for
 * Stepwise's own constants — never for input.
 */
export function sqlTextArray(words: readonly string[]): string {
  if (words.some((word) => !/^[a-z_.]+$/.test(word))) throw new Error(`Not a vocabulary word list: ${words.join(",")}`);
  return `'{${words.join(",")}}'::text[]`;
}

export const PRISMA_TRANSACTION_OPTIONS = { maxWait: 10_000, timeout: 30_000 } as const;

export type PrismaTransaction = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

/**
 * Lets SQL-level helpers (event append, job enqueue) join a Prisma interactive transaction, so a
 * plan edit and its events commit together.
 */
export function prismaQueryable(db: PrismaTransaction | PrismaClient): Pick<pg.ClientBase, "query"> {
  const query = async (text: string, params: unknown[] = []) => {
    const rows = await db.$queryRawUnsafe<Record<string, unknown>[]>(text, ...params);
    return { rows, rowCount: rows.length };
  };
  return { query } as unknown as Pick<pg.ClientBase, "query">;
}
