import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { migrateDatabase } from "../server/cli/bootstrap";
import { findFreePort, startEmbeddedPostgres } from "../server/db/embedded";
import { withDatabase } from "../tests/test-database";

/**
 * A scratch folder and a fresh, migrated database for one benchmark: on `DATABASE_URL`'s server
 * when it is set, else on an embedded PostgreSQL in the folder. `drop` removes all of it.
 */
export async function scratchDatabase(name: string): Promise<{
  scratch: string;
  databaseUrl: string;
  drop(): Promise<void>;
}> {
  const external = process.env.DATABASE_URL;
  const scratch = await fs.mkdtemp(path.join(os.tmpdir(), `stepwise-bench-${name}-`));
  let serverUrl: string;
  let stopServer = async () => undefined as void;
  if (external) {
    serverUrl = withDatabase(external, "postgres");
  } else {
    // The embedded PostgreSQL runs as its own user, which must reach its data folder.
    await fs.chmod(scratch, 0o711);
    const embedded = await startEmbeddedPostgres({
      dataDir: path.join(scratch, "pg"),
      port: await findFreePort(),
      database: "postgres",
    });
    serverUrl = embedded.serverUrl;
    stopServer = () => embedded.stop();
  }
  const dbName = `stepwise_${name}_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  const databaseUrl = withDatabase(serverUrl, dbName);
  await migrateDatabase(databaseUrl);
  return {
    scratch,
    databaseUrl,
    async drop() {
      await admin.query(`drop database if exists ${dbName} with (force)`).catch(() => undefined);
      await admin.end();
      await stopServer();
      await fs.rm(scratch, { recursive: true, force: true });
    },
  };
}
