import { PrismaPg } from "@prisma/adapter-pg";
import { createHash } from "node:crypto";
import pg from "pg";
import {
  backendPid,
  isConnectionError,
  isLockTimeout,
  settleLostCommit,
  type LostCommitSubject,
} from "./database-faults";
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
    /**
     * A commit whose answer the network lost (the connection broke after the commit was sent) is
     * settled by asking PostgreSQL whether the transaction committed (`settleLostCommit`), instead
     * of failing as if it had rolled back: a caller that then retries its work would otherwise
     * take a committed claim for one that never happened. `shouldStop` ends the asking early
     * (the process is going away; the commit's fate is then recovery's to find).
     */
    settleLostCommit?: { shouldStop?: () => boolean };
  } = {},
): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await inTransactionOnce(pool, work, options.openWith, options.settleLostCommit);
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
  settle: { shouldStop?: () => boolean } | undefined,
): Promise<T> {
  const client = await pool.connect();
  let broken: Error | undefined;
  const onError = (error: Error) => (broken = error);
  client.on("error", onError);
  let committed = false;
  // The transaction's id and backend, known before its commit is sent (with `settle` only).
  let transaction: LostCommitSubject | undefined;
  const commit = async (statements: string[]): Promise<pg.QueryResult[]> => {
    try {
      const results = await multiStatement(client, [...statements, "commit"]);
      committed = true;
      return results.slice(0, -1);
    } catch (error) {
      if (!transaction || !isConnectionError(error)) throw error;
      broken ??= error as Error;
      if ((await settleLostCommit(pool, transaction, settle?.shouldStop)) !== "committed") throw error;
      // Committed after all; what its statements answered was lost with the connection.
      committed = true;
      return [];
    }
  };
  const commitWith: CommitWith = async (statements) => {
    if (committed) throw new Error("This transaction has already committed");
    return commit(statements);
  };
  // Asked in the same round trip as `begin`; the transaction would take an id with its first write anyway.
  const begin = settle ? ["begin", TRANSACTION_ID] : ["begin"];
  try {
    let opened: pg.QueryResult[] | undefined;
    const executes = openWith?.map((statement) => preparedExecute(client, statement.text, statement.values));
    let begun: pg.QueryResult[];
    if (executes?.every((execute) => execute !== undefined)) {
      begun = await multiStatement(client, [...begin, ...(executes as string[])]);
      opened = begun.slice(begin.length);
    } else {
      begun = await multiStatement(client, begin);
      // The first time on this connection: each statement on its own, which prepares it.
      if (openWith) {
        opened = [];
        for (const statement of openWith) opened.push(await client.query(statement.text, statement.values));
      }
    }
    if (settle) transaction = { xid: (begun[1]!.rows[0] as { xid: string }).xid, pid: backendPid(client) };
    const result = await work(client, opened, commitWith);
    if (!committed) await commit([]);
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

const TRANSACTION_ID = "select pg_current_xact_id()::text as xid";

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

/**
 * Runs `work` holding a session-level advisory lock named `key` on a connection of its own: one
 * holder at a time across every process on the database, released (and the connection returned)
 * however `work` ends. For work longer than a transaction should be, such as a merge.
 */
export async function withAdvisoryLock<T>(pool: pg.Pool, key: string, work: () => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("select pg_advisory_lock(hashtext($1))", [key]);
    try {
      return await work();
    } finally {
      await client.query("select pg_advisory_unlock(hashtext($1))", [key]);
    }
  } finally {
    client.release();
  }
}
