/**
 * `npm run bench [-- --only W1,W3] [-- --runs 5] [-- --in-workspace]`: the engine workloads of shared/bench/WORKLOADS.md
 * on real PostgreSQL (embedded unless DATABASE_URL), with trivial tools. Prints a table and
 * writes bench/results/latest.json. Times are medians of several runs; nothing here is a test.
 *
 * `--baseline` also runs W1–W3 through a hand-written raw-PostgreSQL loop (bench/raw-loop.ts) on
 * the same database, interleaved run by run with the engine's, so both columns share one machine
 * state; the load average before and after is printed with them.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { createAppContext } from "../server/app-context";
import { connectionBudget, createPool } from "../server/db";
import { migrateDatabase } from "../server/cli/bootstrap";
import { findFreePort, startEmbeddedPostgres } from "../server/db/embedded";
import { startRun } from "../server/engine/engine";
import { readEvents } from "../server/events/store";
import { streamEvents } from "../server/events/stream";
import type { StoredEvent } from "../server/events/types";
import { createPlan } from "../server/plans/service";
import { checkPlanDraft } from "../server/plans/validate";
import { withDatabase } from "../tests/test-database";
import { runRawLoop } from "./raw-loop";
import { checkOrder, percentile, round, stats } from "./stats";
import { benchTools } from "./tools";
import { chainSteps, layeredSteps, randomDagSteps } from "./workloads";

const tools = benchTools;

const args = process.argv.slice(2);
/** `--in-workspace`: W1 and W3 with a step acting in the workspace (routed to its queue task). */
const noop = args.includes("--in-workspace") ? "bench_noop_workspace" : "bench_noop";
const only = args.includes("--only") ? args[args.indexOf("--only") + 1]!.split(",") : ["W1", "W2", "W3", "W4", "W5"];
const runs = args.includes("--runs") ? Number(args[args.indexOf("--runs") + 1]) : 5;
const concurrency = Number(process.env.STEPWISE_WORKER_CONCURRENCY ?? 50);
const baseline = args.includes("--baseline");
/**
 * `--watched`: W1–W3 runs are followed live by a subscriber (as from an open run page), which
 * makes the engine push every event (EventBus.watch); by default nobody watches them.
 */
const watched = args.includes("--watched");
/**
 * `--count`: counts the statements every pg client of this process sends during each measured run
 * (engine, queue, listeners; not the database's own work), by their first words — a profile of
 * round trips per step that does not depend on how busy the machine is.
 */
const counted = args.includes("--count") ? new Map<string, number>() : undefined;
if (counted) {
  const original = pg.Client.prototype.query;
  pg.Client.prototype.query = function (this: pg.Client, ...rest: unknown[]) {
    const first = rest[0];
    const text = typeof first === "string" ? first : (first as { text?: string } | undefined)?.text;
    if (text) {
      const key = text.replace(/\s+/g, " ").trim().slice(0, 60);
      counted.set(key, (counted.get(key) ?? 0) + 1);
    }
    return (original as (...a: unknown[]) => unknown).apply(this, rest);
  } as typeof original;
}

async function main() {
  const external = process.env.DATABASE_URL;
  let serverUrl: string;
  let stopServer = async () => undefined as void;
  let dataDir: string | undefined;
  if (external) {
    serverUrl = withDatabase(external, "postgres");
  } else {
    dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-bench-"));
    const embedded = await startEmbeddedPostgres({ dataDir, port: await findFreePort(), database: "postgres" });
    serverUrl = embedded.serverUrl;
    stopServer = () => embedded.stop();
  }
  const dbName = `stepwise_bench_${randomBytes(4).toString("hex")}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  const version = (await admin.query<{ server_version: string }>("show server_version")).rows[0]!.server_version;
  const databaseUrl = withDatabase(serverUrl, dbName);
  await migrateDatabase(databaseUrl);
  const app = await createAppContext({ databaseUrl, workspaceRoot: os.tmpdir(), worker: { concurrency }, tools });

  const finished = (event: StoredEvent) => event.type === "run.completed" || event.type === "run.failed";

  async function runPlan(steps: ReturnType<typeof chainSteps>, subscriber?: (event: StoredEvent, at: number) => void) {
    const plan = await createPlan(app.db.prisma, tools, {
      draft: { goal: "bench", steps },
      source: "template",
      author: "bench",
    });
    const started = performance.now();
    const { runId } = await startRun(app.engine, {
      planId: plan.id,
      version: 1,
      actor: "bench",
      workspaceRoot: os.tmpdir(),
      maxParallel: 1000,
    });
    let events: StoredEvent[] = [];
    let finishedAt = 0;
    if (subscriber || watched) {
      // Followed live, as the run page does: the run is watched and pushes every event.
      const abort = new AbortController();
      for await (const event of streamEvents(app.bus, app.db.pool, runId, 0, abort.signal)) {
        subscriber?.(event, Date.now());
        events.push(event);
        if (finished(event)) break;
      }
      finishedAt = performance.now();
      abort.abort();
    } else {
      // Nobody follows it (an agent's run, a run left to finish): only its end is pushed, which
      // is all this needs to know; its events are read from the table afterwards.
      await new Promise<void>((resolve, reject) => {
        const done = () => {
          finishedAt ||= performance.now();
          unsubscribe();
          resolve();
        };
        const unsubscribe = app.bus.subscribe(runId, (batch) => {
          if (batch.some(finished)) done();
        });
        // A run that ended before the subscription would never be heard of.
        app.db.pool
          .query<{ status: string }>("select status from runs where id = $1", [runId])
          .then(({ rows }) => ["completed", "failed"].includes(rows[0]!.status) && done(), reject);
      });
      events = await readEvents(app.db.pool, runId, 0);
    }
    return {
      makespan: finishedAt - started,
      valid: events.at(-1)?.type === "run.completed" && checkOrder(events, steps),
    };
  }

  // The baseline's pool is the size of the engine's pool in a worker process with the default budget.
  const rawPool = baseline
    ? createPool(databaseUrl, { max: connectionBudget({ worker: true }).engine, applicationName: "bench-raw" })
    : undefined;

  async function runRaw(steps: ReturnType<typeof chainSteps>, planId: string) {
    return runRawLoop(rawPool!, tools, planId, steps, concurrency);
  }

  async function repeat(steps: ReturnType<typeof chainSteps>) {
    const rawPlan = baseline
      ? await createPlan(app.db.prisma, tools, { draft: { goal: "raw", steps }, source: "template", author: "bench" })
      : undefined;
    await runPlan(steps); // warm-up: caches, JIT, connection pools
    if (rawPlan) await runRaw(steps, rawPlan.id);
    // A database in use has planner statistics (autovacuum analyses a table within a minute of
    // enough changes); this one was created seconds ago. Without them PostgreSQL guesses, and
    // reads a run's steps by run alone instead of by primary key — for the raw loop as well.
    await app.db.pool.query("analyze");
    const times: number[] = [];
    const rawTimes: number[] = [];
    let valid = true;
    let rawValid = true;
    counted?.clear();
    for (let i = 0; i < runs; i++) {
      // Interleaved, alternating which goes first, so a change in the machine's load hits both.
      const engineFirst = i % 2 === 0;
      if (rawPlan && !engineFirst) {
        const raw = await runRaw(steps, rawPlan.id);
        rawTimes.push(raw.makespan);
        rawValid &&= raw.valid;
      }
      const result = await runPlan(steps);
      times.push(result.makespan);
      valid &&= result.valid;
      if (rawPlan && engineFirst) {
        const raw = await runRaw(steps, rawPlan.id);
        rawTimes.push(raw.makespan);
        rawValid &&= raw.valid;
      }
    }
    if (counted) {
      const perRun = [...counted.entries()].sort((a, b) => b[1] - a[1]);
      const total = perRun.reduce((sum, [, n]) => sum + n, 0);
      console.log(
        `\nstatements per run (${runs} runs, ${steps.length} steps): ${round(total / runs)}, per step ${round(total / runs / steps.length)}`,
      );
      for (const [text, n] of perRun.slice(0, 25)) console.log(`${String(round(n / runs)).padStart(8)}  ${text}`);
    }
    const raw = rawPlan ? { raw: { ...stats(rawTimes), valid: rawValid } } : {};
    return { ...stats(times), valid, ...raw };
  }

  const workloads: Record<string, Record<string, unknown>> = {};
  const loadBefore = os.loadavg().map(round);
  if (only.includes("W1")) {
    const result = await repeat(layeredSteps(10, 100, noop, (i) => ({ i })));
    workloads.W1 = { ...result, steps_per_s: round(1000 / (result.median_ms / 1000)) };
  }
  if (only.includes("W2")) {
    const result = await repeat(layeredSteps(4, 50, "bench_sleep", (i) => ({ i })));
    workloads.W2 = { ...result, efficiency: round(200 / result.median_ms) };
  }
  if (only.includes("W3")) {
    const result = await repeat(chainSteps(200, noop));
    workloads.W3 = { ...result, ms_per_step: round(result.median_ms / 200) };
  }
  if (only.includes("W4")) {
    const latencies: number[] = [];
    const result = await runPlan(
      layeredSteps(10, 100, "bench_noop", (i) => ({ i })),
      (event, at) => {
        latencies.push(at - Date.parse(event.createdAt));
      },
    );
    workloads.W4 = {
      p50_ms: percentile(latencies, 50),
      p99_ms: percentile(latencies, 99),
      events: latencies.length,
      valid: result.valid,
    };
  }
  if (only.includes("W5")) {
    const draft = { goal: "validation", steps: randomDagSteps(10_000, 3) };
    const times: number[] = [];
    let valid = true;
    for (let i = 0; i < runs + 1; i++) {
      const started = performance.now();
      const checked = checkPlanDraft(draft, tools);
      if (i > 0) times.push(performance.now() - started);
      valid &&= checked.ok;
    }
    workloads.W5 = { ...stats(times), valid };
  }

  const config = {
    database: external ? "external" : "embedded",
    postgres: version,
    workers: 1,
    concurrency,
    max_parallel: 1000,
    // Whether W1–W3 runs were followed live (W4's always is).
    watched,
    node: process.version,
    cpus: os.cpus().length,
    load_average: { before: loadBefore, after: os.loadavg().map(round) },
  };
  console.log(`\nconfig: ${JSON.stringify(config)}`);
  console.log("workload | median ms | min | max | valid | figure");
  for (const [id, w] of Object.entries(workloads)) {
    const figure = Object.entries(w)
      .filter(([k]) => !["median_ms", "min_ms", "max_ms", "runs", "valid", "raw"].includes(k))
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
    console.log(`${id} | ${w.median_ms ?? "-"} | ${w.min_ms ?? "-"} | ${w.max_ms ?? "-"} | ${w.valid} | ${figure}`);
  }
  const rawRows = Object.entries(workloads).filter(([, w]) => w.raw);
  if (rawRows.length > 0) {
    console.log("\nbaseline (bench/raw-loop.ts, interleaved with the runs above)");
    console.log("workload | stepwise median | raw median (min–max) | raw valid | stepwise / raw");
    for (const [id, w] of rawRows) {
      const raw = w.raw as ReturnType<typeof stats> & { valid: boolean };
      const ratio = round((w.median_ms as number) / raw.median_ms);
      console.log(`${id} | ${w.median_ms} | ${raw.median_ms} (${raw.min_ms}–${raw.max_ms}) | ${raw.valid} | ${ratio}`);
    }
  }
  await fs.mkdir(path.join(import.meta.dirname, "results"), { recursive: true });
  await fs.writeFile(
    path.join(import.meta.dirname, "results", "latest.json"),
    JSON.stringify({ config, workloads }, null, 2),
  );

  await rawPool?.end();
  await app.close();
  await admin.query(`drop database ${dbName} with (force)`);
  await admin.end();
  await stopServer();
  if (dataDir) await fs.rm(dataDir, { recursive: true, force: true });
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
