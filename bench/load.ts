/**
 * `npm run bench:load [-- --runs 10] [-- --steps 500] [-- --subscribers 5] [-- --workers 2]`:
 * the engine under load, as issue 15 defines it — 10 runs of 500 steps (W1's layered shape of
 * `echo` steps) started together, executed by two `stepwise worker` processes, while 5 stream
 * subscribers in this process (as in the web server, which then runs no steps itself) each
 * follow every run.
 *
 * Checks what must hold under any load — every subscriber receives every event of every run once,
 * in order, with no gap (sequence numbers 1..N, compared with the table), and no step starts
 * before its dependencies completed — and measures what should be fast: each event's delivery
 * delay from its commit timestamp to its arrival at a subscriber (p50/p99), and the makespan.
 * Real PostgreSQL (embedded unless DATABASE_URL). Prints a table and writes
 * bench/results/load.json; it asserts nothing about time.
 */
import { type ChildProcess, spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createAppContext } from "../server/app-context";
import { startRun } from "../server/engine/engine";
import { streamEvents } from "../server/events/stream";
import type { StoredEvent } from "../server/events/types";
import { createPlan } from "../server/plans/service";
import { scratchDatabase } from "./scratch-database";
import { checkOrder, percentile, round } from "./stats";
import { layeredSteps } from "./workloads";

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const RUNS = option("runs", 10);
const STEPS = option("steps", 500);
const SUBSCRIBERS = option("subscribers", 5);
const WORKERS = option("workers", 2);
const CONCURRENCY = Number(process.env.STEPWISE_WORKER_CONCURRENCY ?? 50);
/** Where the result goes (bench/scale.ts runs this file many times and collects each). */
const OUTPUT = process.argv.includes("--out")
  ? process.argv[process.argv.indexOf("--out") + 1]!
  : path.join(import.meta.dirname, "results", "load.json");

/**
 * The database server's connections to the bench database, sampled every 100 ms while the runs
 * go: the peak is what this shape of deployment asks of one PostgreSQL.
 */
function sampleConnections(pool: import("pg").Pool, database: string): { stop(): Promise<number> } {
  let peak = 0;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      const { rows } = await pool
        .query<{ n: number }>("select count(*)::int as n from pg_stat_activity where datname = $1", [database])
        .catch(() => ({ rows: [{ n: 0 }] }));
      peak = Math.max(peak, rows[0]!.n);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return peak;
    },
  };
}

/** The server's write-ahead log position, to count the bytes a run writes (whole server). */
async function walPosition(pool: import("pg").Pool): Promise<string> {
  const { rows } = await pool.query<{ lsn: string }>("select pg_current_wal_lsn()::text as lsn");
  return rows[0]!.lsn;
}

/** Spawns `stepwise worker` on the bench database and resolves once it says it started. */
async function startWorkerProcess(databaseUrl: string, dataDir: string): Promise<ChildProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", "server/cli/main.ts", "worker"], {
    cwd: path.join(import.meta.dirname, ".."),
    env: {
      ...process.env,
      DATABASE_URL: databaseUrl,
      STEPWISE_DATA_DIR: dataDir,
      STEPWISE_WORKER_CONCURRENCY: String(CONCURRENCY),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  await new Promise<void>((resolve, reject) => {
    let output = "";
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes("Worker started")) resolve();
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", onData);
    child.on("exit", (code) => reject(new Error(`worker exited with ${code}:\n${output}`)));
  });
  return child;
}

interface Received {
  events: StoredEvent[];
  delays: number[];
}

/** One subscriber following one run to its end; the delay of each event from its commit. */
async function follow(app: Awaited<ReturnType<typeof createAppContext>>, runId: string): Promise<Received> {
  const received: Received = { events: [], delays: [] };
  const abort = new AbortController();
  for await (const event of streamEvents(app.bus, app.db.pool, runId, 0, abort.signal)) {
    received.delays.push(Date.now() - Date.parse(event.createdAt));
    received.events.push(event);
    if (event.type === "run.completed" || event.type === "run.failed" || event.type === "run.cancelled") break;
  }
  abort.abort();
  return received;
}

async function main() {
  const { scratch, databaseUrl, drop } = await scratchDatabase("load");
  const app = await createAppContext({
    databaseUrl,
    workspaceRoot: scratch,
    worker: false,
  });
  const others: ChildProcess[] = [];
  try {
    for (let i = 0; i < WORKERS; i++) others.push(await startWorkerProcess(databaseUrl, path.join(scratch, `w${i}`)));

    const steps = layeredSteps(Math.ceil(STEPS / 100), Math.min(100, STEPS), "echo", (i) => ({ value: i }));
    const plans = await Promise.all(
      Array.from({ length: RUNS }, () =>
        createPlan(app.db.prisma, app.tools, { draft: { goal: "load", steps }, source: "template", author: "bench" }),
      ),
    );
    const database = new URL(databaseUrl).pathname.slice(1);
    const connections = sampleConnections(app.db.pool, database);
    const walBefore = await walPosition(app.db.pool);
    const started = performance.now();
    const runIds = await Promise.all(
      plans.map(
        async (plan) =>
          (
            await startRun(app.engine, {
              planId: plan.id,
              version: 1,
              actor: "bench",
              workspaceRoot: scratch,
              maxParallel: 1000,
            })
          ).runId,
      ),
    );
    const followed = await Promise.all(
      Array.from({ length: SUBSCRIBERS }, () => Promise.all(runIds.map((runId) => follow(app, runId)))),
    );
    const makespan = performance.now() - started;
    const peakConnections = await connections.stop();
    const wal = await app.db.pool.query<{ bytes: string }>(
      "select pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::text as bytes",
      [walBefore],
    );
    const walBytes = Number(wal.rows[0]!.bytes);

    // What the table holds is the truth each subscriber's copy is compared with.
    const stored = await app.db.pool.query<{ stream_id: string; count: string; last: number }>(
      "select stream_id, count(*) as count, max(seq) as last from events where stream_id = any($1) group by stream_id",
      [runIds],
    );
    // Which process ran each step: both workers must have shared the work.
    const perWorker = await app.db.pool.query<{ pid: number; steps: string }>(
      `select w.pid, count(*) as steps from run_steps s join workers w on w.id = s.worker_id
       where s.run_id = any($1) group by w.pid order by w.pid`,
      [runIds],
    );
    const expected = new Map(stored.rows.map((row) => [row.stream_id, Number(row.count)]));
    let lost = 0;
    let duplicated = 0;
    let outOfOrder = 0;
    let ordered = true;
    const delays: number[] = [];
    for (const perRun of followed) {
      perRun.forEach((received, index) => {
        const runId = runIds[index]!;
        const seqs = received.events.map((event) => event.seq);
        duplicated += seqs.length - new Set(seqs).size;
        seqs.forEach((seq, i) => {
          if (seq !== i + 1) outOfOrder++;
        });
        lost += Math.max(0, (expected.get(runId) ?? 0) - new Set(seqs).size);
        ordered &&= received.events.at(-1)?.type === "run.completed" && checkOrder(received.events, steps);
        delays.push(...received.delays);
      });
    }
    const result = {
      config: {
        database: process.env.DATABASE_URL ? "external" : "embedded",
        runs: RUNS,
        steps_per_run: steps.length,
        worker_processes: WORKERS,
        concurrency: CONCURRENCY,
        subscribers: SUBSCRIBERS,
        node: process.version,
        cpus: os.cpus().length,
      },
      makespan_ms: round(makespan),
      steps_per_s: round((RUNS * steps.length) / (makespan / 1000)),
      events_delivered: delays.length,
      delivery_p50_ms: percentile(delays, 50),
      delivery_p99_ms: percentile(delays, 99),
      steps_by_worker_pid: Object.fromEntries(perWorker.rows.map((row) => [row.pid, Number(row.steps)])),
      wal_bytes_per_step: round(walBytes / (RUNS * steps.length)),
      peak_connections: peakConnections,
      load_average: os.loadavg().map((load) => round(load)),
      lost,
      duplicated,
      out_of_order: outOfOrder,
      dependencies_respected: ordered,
    };
    console.log(JSON.stringify(result, null, 2));
    await fs.mkdir(path.dirname(OUTPUT), { recursive: true });
    await fs.writeFile(OUTPUT, JSON.stringify(result, null, 2));
  } finally {
    const exited = others.map((child) =>
      child.exitCode !== null ? Promise.resolve() : new Promise((resolve) => child.once("exit", resolve)),
    );
    for (const child of others) child.kill("SIGTERM");
    await Promise.all(exited);
    await app.close();
    await drop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
