import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { afterEach, expect, it } from "vitest";
import { createTestDatabase } from "../../tests/test-database";
import { writeConnectionFile } from "./connection-file";

/**
 * `npm run worker` next to a running `npm start` on the embedded database: no DATABASE_URL to
 * find, the worker reads it from the server's server.json and joins.
 */
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

it("a worker started without DATABASE_URL joins the running server's embedded database", async () => {
  const database = await createTestDatabase();
  cleanups.push(() => database.drop());
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-join-"));
  cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
  // What `npm start` on the embedded database writes; this test process stands in for the server.
  await writeConnectionFile(dataDir, {
    url: "http://127.0.0.1:1",
    token: "t",
    pid: process.pid,
    databaseUrl: database.url,
  });

  const { DATABASE_URL: _unset, ...env } = process.env;
  const child = spawn(process.execPath, ["--import", "tsx", "server/cli/main.ts", "worker"], {
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
  expect(await fs.readdir(dataDir)).not.toContain("pg");
  const client = new pg.Client({ connectionString: database.url });
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
