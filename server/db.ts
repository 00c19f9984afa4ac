import { PrismaPg } from "@prisma/adapter-pg";
import pg from "pg";
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

export function connectDatabase(url: string, options: { poolSize?: number } = {}): Database {
  const pool = new pg.Pool({ connectionString: url, max: options.poolSize ?? 20 });
  // An idle client losing its connection (server restart) must not crash the process.
  pool.on("error", () => undefined);
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: url, max: 10 }) });
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

/** Runs `work` in one transaction on a pooled client. */
export async function inTransaction<T>(pool: pg.Pool, work: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query("begin");
    const result = await work(client);
    await client.query("commit");
    return result;
  } catch (error) {
    await client.query("rollback").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}

type PrismaTransaction = Parameters<Parameters<PrismaClient["$transaction"]>[0]>[0];

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
