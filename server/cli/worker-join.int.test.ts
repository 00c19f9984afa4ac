import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, expect, it } from "vitest";
import { migrateDatabase } from "./bootstrap";
import { startEmbeddedPostgres } from "../db/embedded";
import { writeConnectionFile } from "./connection-file";
import { programCommand } from "../../tests/program-command";

/**
 * `npm run worker` next to a running `npm start` on the embedded database: no DATABASE_URL, and no
 * credentials in the server's server.json — the worker finds the socket PostgreSQL announces and
 * the app role's password in the data folder's 0600 secret file, and joins.
 */
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a worker started without DATABASE_URL joins the running server's embedded database", async () => {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-join-"));
  cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
  // What `npm start` on the embedded database does; this test process stands in for the server.
  const database = await startEmbeddedPostgres({ dataDir });
  cleanups.push(() => database.stop());
  await migrateDatabase(database.databaseUrl);
  const file = await writeConnectionFile(dataDir, { url: "http://127.0.0.1:1", token: "t", pid: process.pid });
  const secret = JSON.parse(await fs.readFile(path.join(dataDir, "pg-secret"), "utf8")) as Record<string, string>;
  const connectionText = await fs.readFile(file, "utf8");
  expect(connectionText).not.toContain(secret.app);
  expect(connectionText).not.toContain(secret.superuser);
  expect(connectionText).not.toMatch(/postgres(ql)?:/);

  const { DATABASE_URL: _unset, ...env } = process.env;
  const [command, ...args] = programCommand("server/cli/main.ts", ["worker"]);
  const child = spawn(command!, args, {
    cwd: projectRoot,
    env: { ...env, STEPWISE_DATA_DIR: dataDir, STEPWISE_HEARTBEAT_MS: "200" },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
  cleanups.push(async () => {
    child.kill("SIGKILL");
    await exited;
  });

  await expect.poll(() => output, { timeout: 45_000 }).toContain("Worker started");
  expect(output).toContain(`Joining the running Stepwise (pid ${process.pid}) on its embedded PostgreSQL`);
  // It yields the CPU to the server beside it: niceness 10 (field 19 of /proc/<pid>/stat).
  const niceness = (await fs.readFile(`/proc/${child.pid}/stat`, "utf8")).split(") ")[1]!.split(" ")[16];
  expect(Number(niceness)).toBe(Math.max(10, os.getPriority()));
  expect(output).toMatch(/Worker started \(concurrency \d+, nice 10\)/);
  // It registered on the server's database, not on an embedded one of its own.
  const client = new pg.Client({ connectionString: database.databaseUrl });
  await client.connect();
  try {
    const rows = await client.query<{ pid: number }>("select pid from workers where stopped_at is null");
    expect(rows.rows.map((row) => row.pid)).toContain(child.pid);
  } finally {
    await client.end();
  }
  child.kill("SIGTERM");
  expect(await exited).toBe(0);
}, 90_000);
