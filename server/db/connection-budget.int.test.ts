import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createProbeRegistry, readProbeLog } from "../../tests/probe-tool";
import { spawnProbeWorker } from "../../tests/probe-worker";
import { createAppContext } from "../app-context";
import { connectionBudget } from "../db";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";
import { migrateDatabase } from "../cli/bootstrap";
import { findFreePort, startEmbeddedPostgres } from "./embedded";

/**
 * The connection budget: two worker processes and a server, each held to STEPWISE_DB_CONNECTIONS,
 * share a PostgreSQL server with max_connections = 60 under a load that fills every pool, and no
 * process is refused a connection. Each process's connections are counted from the operating
 * system's socket table, not from what the code believes it opened.
 */

const BUDGET = 18;
const cleanups: (() => Promise<unknown>)[] = [];
const previousBudget = process.env.STEPWISE_DB_CONNECTIONS;
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
  if (previousBudget === undefined) delete process.env.STEPWISE_DB_CONNECTIONS;
  else process.env.STEPWISE_DB_CONNECTIONS = previousBudget;
});

/** Open TCP connections to `port`, per process id, from /proc. */
async function connectionsByProcess(port: number, pids: number[]): Promise<Map<number, number>> {
  const hexPort = port.toString(16).toUpperCase().padStart(4, "0");
  const inodes = new Set<string>();
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    const text = await fs.readFile(table, "utf8").catch(() => "");
    for (const line of text.split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/);
      // rem_address is field 2 (host:port); state 01 is ESTABLISHED; the inode is field 9.
      if (fields.length > 9 && fields[2]!.endsWith(`:${hexPort}`) && fields[3] === "01") inodes.add(fields[9]!);
    }
  }
  const counts = new Map<number, number>();
  for (const pid of pids) {
    const fds = await fs.readdir(`/proc/${pid}/fd`).catch(() => [] as string[]);
    let count = 0;
    for (const fd of fds) {
      const target = await fs.readlink(`/proc/${pid}/fd/${fd}`).catch(() => "");
      const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1];
      if (inode && inodes.has(inode)) count++;
    }
    counts.set(pid, count);
  }
  return counts;
}

describe("the connection budget", () => {
  it("shares a process's budget out without exceeding it", () => {
    for (const total of [12, 18, 30, 64]) {
      for (const worker of [true, false]) {
        const budget = connectionBudget({ total, worker });
        expect(budget.dedicated + budget.engine + budget.prisma + budget.queue).toBe(total);
        expect(budget.engine).toBeGreaterThanOrEqual(4);
      }
    }
    expect(() => connectionBudget({ total: 5, worker: true })).toThrow(/at least/);
  });

  it("two workers and a server fit a max_connections = 60 server under load", { timeout: 600_000 }, async () => {
    process.env.STEPWISE_DB_CONNECTIONS = String(BUDGET);
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-budget-pg-"));
    cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
    const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-ws-"));
    cleanups.push(() => fs.rm(workspace, { recursive: true, force: true }));
    const port = await findFreePort();
    // Over loopback TCP, so each process's connections can be told apart in /proc/net/tcp.
    const server = await startEmbeddedPostgres({
      dataDir,
      port,
      database: "stepwise",
      maxConnections: 60,
      access: "tcp",
    });
    cleanups.push(() => server.stop());
    await migrateDatabase(server.databaseUrl);
    const app = await createAppContext({
      databaseUrl: server.databaseUrl,
      workspaceRoot: workspace,
      worker: false,
      tools: createProbeRegistry(),
    });
    cleanups.push(() => app.close());
    const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
    const probeLog = path.join(workspace, "probe.log");
    const workers = [0, 1].map(() =>
      spawnProbeWorker({ databaseUrl: server.databaseUrl, probeLog, workspace, heartbeatMs: 200, concurrency: 16 }),
    );
    for (const worker of workers) cleanups.push(() => worker.kill());
    await Promise.all(workers.map((worker) => worker.ready));

    // Wide runs keep every pool busy: 32 steps can run at once across the two workers.
    const runIds: string[] = [];
    for (let i = 0; i < 8; i++) {
      const steps = Array.from({ length: 12 }, (_, j) => ({
        id: `step_${j + 1}`,
        tool: "probe",
        args: { sleepMs: 100 },
      }));
      const plan = await caller.plans.createFromJson({ planJson: JSON.stringify({ goal: `wide ${i}`, steps }) });
      runIds.push((await caller.plans.approve({ planId: plan.id, version: plan.version })).runId);
    }
    const pids = [process.pid, ...workers.map((worker) => worker.pid)];
    const peak = new Map<number, number>(pids.map((pid) => [pid, 0]));
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        for (const [pid, count] of await connectionsByProcess(port, pids))
          peak.set(pid, Math.max(peak.get(pid)!, count));
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
    try {
      for (const runId of runIds) {
        await expect
          .poll(async () => (await caller.runs.get({ runId })).status, { timeout: 120_000, interval: 200 })
          .toBe("completed");
      }
    } finally {
      sampling = false;
      await sampler;
    }
    expect(await readProbeLog(probeLog)).toHaveLength(8 * 12);
    for (const worker of workers) {
      expect(worker.child.exitCode).toBe(null);
      expect(worker.output()).not.toMatch(/too many clients/);
    }
    for (const [pid, count] of peak) expect(count, `connections of pid ${pid}`).toBeLessThanOrEqual(BUDGET);
    // The sockets were really counted: each process had connections open.
    for (const [, count] of peak) expect(count).toBeGreaterThan(0);
    const client = new pg.Client({ connectionString: server.databaseUrl });
    await client.connect();
    try {
      const refused = await client.query<{ n: number }>(
        "select count(*)::int as n from workers where stopped_at is null",
      );
      expect(refused.rows[0]!.n).toBe(2);
    } finally {
      await client.end();
    }
  });
});
