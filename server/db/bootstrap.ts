import { runMigrations as runWorkerMigrations } from "graphile-worker";
import pg from "pg";
import type { AppConfig } from "../env";
import { startEmbeddedPostgres } from "./embedded";
import { applyMigrations } from "./schema-engine";

export interface DatabaseHandle {
  databaseUrl: string;
  embedded: boolean;
  stop(): Promise<void>;
}

/**
 * The database the app runs on: DATABASE_URL when given, else the embedded PostgreSQL in the data
 * folder. Either way the schema is brought up to date before anything uses it.
 */
export async function openDatabase(
  config: Pick<AppConfig, "databaseUrl" | "dataDir" | "embeddedPgPort">,
  log: (line: string) => void,
): Promise<DatabaseHandle> {
  let handle: DatabaseHandle;
  if (config.databaseUrl) {
    handle = { databaseUrl: config.databaseUrl, embedded: false, stop: async () => undefined };
  } else {
    log(`Starting embedded PostgreSQL (data in ${config.dataDir})…`);
    const embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, log });
    handle = { databaseUrl: embedded.databaseUrl, embedded: true, stop: () => embedded.stop() };
  }
  try {
    await migrateDatabase(handle.databaseUrl, log);
  } catch (error) {
    await handle.stop();
    throw error;
  }
  return handle;
}

/** Applies Stepwise's migrations and the job queue's own schema. Idempotent. */
export async function migrateDatabase(
  databaseUrl: string,
  log: (line: string) => void = () => undefined,
): Promise<void> {
  const applied = await applyMigrations({ databaseUrl });
  // One line however many there are; their names are in prisma/migrations and _prisma_migrations.
  if (applied.length > 0) {
    log(
      `Database schema updated: ${applied.length} migration${applied.length === 1 ? "" : "s"} applied (latest ${applied.at(-1)})`,
    );
  }
  await runWorkerMigrations({ connectionString: databaseUrl, logger: undefined });
  await installEngineFunctions(databaseUrl);
}

/**
 * The engine's own database function, kept up to date at every start (`create or replace`): not a
 * Prisma migration, because the migration runner splits a script at every semicolon and a
 * PL/pgSQL body is made of them.
 *
 * `stepwise_expect` ends an optimistic step transaction (server/engine/batching.ts), which sends
 * the results it expects of its reads together with its writes in one round trip, before any
 * write when the reads turn out otherwise (SQLSTATE SW001); the engine then goes the usual way.
 */
async function installEngineFunctions(databaseUrl: string): Promise<void> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    await client.query(`
      create or replace function stepwise_expect(ok boolean, what text) returns void
      language plpgsql as $$
      begin
        if ok is not true then
          raise exception 'stale prediction: %', what using errcode = 'SW001';
        end if;
      end
      $$`);
  } finally {
    await client.end();
  }
}
