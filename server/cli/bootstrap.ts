import { runMigrations as runWorkerMigrations } from "graphile-worker";
import pg from "pg";
import { sealAuditChain } from "../audit/chain";
import type { AppConfig } from "../env";
import { startEmbeddedPostgres } from "../db/embedded";
import { applyMigrations } from "../db/schema-engine";

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
    const embedded = await startEmbeddedPostgres({
      dataDir: config.dataDir,
      port: config.embeddedPgPort,
      log,
      // Nothing works without it, and nothing can be stopped in order either (that writes to it):
      // this process ends at once, saying why, with a failure a process manager restarts on.
      // Steps it had in progress are taken up by recovery at the next start.
      onLost: (how) => {
        log(
          `The embedded PostgreSQL stopped (${how}) while Stepwise was running; Stepwise stops too. ` +
            `Start it again; steps that were in progress are taken up then (its log: ${config.dataDir}/pg.log).`,
        );
        process.exit(1);
      },
    });
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
  /** Only these of Stepwise's migrations (a restore first brings the schema to its backup's). */
  only?: readonly string[],
): Promise<void> {
  const applied = await applyMigrations({ databaseUrl, ...(only && { only }) });
  // One line however many there are; their names are in prisma/migrations and _prisma_migrations.
  if (applied.length > 0) {
    log(
      `Database schema updated: ${applied.length} migration${applied.length === 1 ? "" : "s"} applied (latest ${applied.at(-1)})`,
    );
  }
  await runWorkerMigrations({ connectionString: databaseUrl, logger: undefined });
  const sealed = await sealEntriesFromBeforeTheChain(databaseUrl);
  if (sealed > 0) log(`Audit log sealed: ${sealed} earlier entries hashed into the chain`);
}

async function sealEntriesFromBeforeTheChain(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    return await sealAuditChain(client);
  } finally {
    await client.end();
  }
}
