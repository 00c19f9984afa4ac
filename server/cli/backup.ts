/**
 * `stepwise backup FILE` and `stepwise restore FILE`: the database (embedded or DATABASE_URL) and
 * the data folder's secrets, in one file (server/ops/backup.ts says what is in it and why it is
 * consistent while Stepwise runs). A backup joins the running Stepwise's embedded database when
 * there is one, and otherwise starts the data folder's database for as long as it takes. A restore
 * goes into an empty database only — a fresh data folder, or a new DATABASE_URL database — with
 * no Stepwise running on it.
 */
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { migrateDatabase } from "./bootstrap";
import {
  assertNoOtherStepwise,
  runningEmbeddedDatabaseUrl,
  startEmbeddedPostgres,
  type EmbeddedDatabase,
} from "../db/embedded";
import { DECISION_LINK_KEY_FILE } from "../decisions/decision-links";
import { readConfig } from "../env";
import { loadBackup, readBackupHeader, writeBackup } from "../ops/backup";
import { ACCESS_TOKEN_FILE } from "./access-token";

// eslint-disable-next-line no-console -- the deliberate human output of the CLI
const log = (line: string) => console.log(`[stepwise] ${line}`);

/** What in the data folder a restored server needs: the person's access token and the decision-link key. */
const SECRET_FILES = [ACCESS_TOKEN_FILE, DECISION_LINK_KEY_FILE];
// Not `new URL("…", import.meta.url)`: the web server's bundler takes that for an asset to bundle.
const migrationsDir = path.join(path.dirname(fileURLToPath(import.meta.url)), "..", "..", "prisma", "migrations");

export async function backup(file: string, stepwiseVersion: string): Promise<void> {
  const config = readConfig();
  if (await exists(file)) throw new Error(`${file} already exists; name a new file for the backup`);
  const secrets: Record<string, Buffer> = {};
  for (const name of SECRET_FILES) {
    const content = await fs.readFile(path.join(config.dataDir, name)).catch(() => undefined);
    if (content) secrets[name] = content;
  }
  const database = await openSource(config);
  try {
    const summary = await writeBackup({ databaseUrl: database.url, file, stepwiseVersion, secrets });
    log(
      `Backed up ${summary.rows} rows of ${summary.tables} tables and ${Object.keys(secrets).length} secret file(s) to ${file}`,
    );
  } finally {
    await database.stop();
  }
}

export async function restore(file: string): Promise<void> {
  const config = readConfig();
  const header = await readBackupHeader(file);
  const shipped = new Set(
    (await fs.readdir(migrationsDir, { withFileTypes: true })).filter((e) => e.isDirectory()).map((e) => e.name),
  );
  const unknown = header.migrations.filter((name) => !shipped.has(name));
  if (unknown.length > 0) {
    throw new Error(
      `${file} was made by a newer Stepwise (${header.stepwiseVersion}; migration ${unknown[0]} is unknown here): update, then restore`,
    );
  }
  let embedded: EmbeddedDatabase | undefined;
  let databaseUrl = config.databaseUrl;
  if (!databaseUrl) {
    // Never under a running Stepwise: its processes would work on a database changing beneath them.
    await assertNoOtherStepwise(config.dataDir, log);
    embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, log });
    databaseUrl = embedded.databaseUrl;
  }
  try {
    // The schema the backup was taken with, its rows, then whatever migrations came since.
    await migrateDatabase(databaseUrl, log, header.migrations);
    const summary = await loadBackup({ databaseUrl, file });
    await migrateDatabase(databaseUrl, log);
    await fs.mkdir(config.dataDir, { recursive: true, mode: 0o700 });
    for (const [name, content] of Object.entries(header.secrets)) {
      await fs.writeFile(path.join(config.dataDir, name), Buffer.from(content, "base64"), { mode: 0o600 });
      await fs.chmod(path.join(config.dataDir, name), 0o600);
    }
    log(
      `Restored ${summary.rows} rows of ${summary.tables} tables from ${file} (taken ${header.createdAt}) and ${Object.keys(header.secrets).length} secret file(s) into ${config.dataDir}`,
    );
  } finally {
    await embedded?.stop();
  }
}

/** The database to back up: DATABASE_URL, the running Stepwise's, or the data folder's, started for the backup. */
async function openSource(config: ReturnType<typeof readConfig>): Promise<{ url: string; stop(): Promise<void> }> {
  if (config.databaseUrl) return { url: config.databaseUrl, stop: async () => undefined };
  const running = await runningEmbeddedDatabaseUrl(config.dataDir);
  if (running) return { url: running, stop: async () => undefined };
  if (!(await exists(path.join(config.dataDir, "pg", "PG_VERSION")))) {
    throw new Error(`No Stepwise database in ${config.dataDir} (set STEPWISE_DATA_DIR, or DATABASE_URL)`);
  }
  await assertNoOtherStepwise(config.dataDir, log);
  const embedded = await startEmbeddedPostgres({ dataDir: config.dataDir, port: config.embeddedPgPort, log });
  return { url: embedded.databaseUrl, stop: () => embedded.stop() };
}

async function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
