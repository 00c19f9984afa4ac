/**
 * `npm run bench [-- --only W1,W3] [-- --runs 5]`: the engine workloads of shared/bench/WORKLOADS.md
 * on real PostgreSQL (embedded unless DATABASE_URL), with trivial tools. Prints a table and
 * writes bench/results/latest.json. Times are medians of several runs; nothing here is a test.
 */
import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import pg from "pg";
import { z } from "zod";
import { createAppContext } from "../server/app-context";
import { migrateDatabase } from "../server/db/bootstrap";
import { findFreePort, startEmbeddedPostgres } from "../server/db/embedded";
import { startRun } from "../server/engine/engine";
import { streamEvents } from "../server/events/stream";
import type { StoredEvent } from "../server/events/types";
import { createPlan } from "../server/plans/service";
import { checkPlanDraft } from "../server/plans/validate";
import { createToolRegistry } from "../server/tools/registry";
import { defineTool } from "../server/tools/types";
import { withDatabase } from "../tests/test-database";
import { checkOrder, percentile, round, stats } from "./stats";
import { chainSteps, layeredSteps, randomDagSteps } from "./workloads";

const benchNoop = defineTool({
  name: "bench_noop",
  description: "Returns its index",
  inputSchema: z.object({ i: z.number(), from: z.unknown().optional() }),
  capability: "data.transform",
  capabilityLabel: "Transform data",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 60,
  async execute({ i }) {
    return { i };
  },
});
const benchSleep = defineTool({
  ...benchNoop,
  name: "bench_sleep",
  description: "Sleeps 50 ms",
  async execute({ i }, context) {
    await delay(50, undefined, { signal: context.signal });
    return { i };
  },
});
const tools = createToolRegistry([benchNoop, benchSleep]);

const args = process.argv.slice(2);
const only = args.includes("--only") ? args[args.indexOf("--only") + 1]!.split(",") : ["W1", "W2", "W3", "W4", "W5"];
const runs = args.includes("--runs") ? Number(args[args.indexOf("--runs") + 1]) : 5;
const concurrency = Number(process.env.STEPWISE_WORKER_CONCURRENCY ?? 50);

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
    const abort = new AbortController();
    const events: StoredEvent[] = [];
    let finishedAt = 0;
    for await (const event of streamEvents(app.bus, app.db.pool, runId, 0, abort.signal)) {
      subscriber?.(event, Date.now());
      events.push(event);
      if (event.type === "run.completed" || event.type === "run.failed") {
        finishedAt = performance.now();
        break;
      }
    }
    abort.abort();
    return {
      makespan: finishedAt - started,
      valid: events.at(-1)?.type === "run.completed" && checkOrder(events, steps),
    };
  }

  async function repeat(steps: ReturnType<typeof chainSteps>) {
    await runPlan(steps); // warm-up: caches, JIT, connection pools
    const times: number[] = [];
    let valid = true;
    for (let i = 0; i < runs; i++) {
      const result = await runPlan(steps);
      times.push(result.makespan);
      valid &&= result.valid;
    }
    return { ...stats(times), valid };
  }

  const workloads: Record<string, Record<string, unknown>> = {};
  if (only.includes("W1")) {
    const result = await repeat(layeredSteps(10, 100, "bench_noop", (i) => ({ i })));
    workloads.W1 = { ...result, steps_per_s: round(1000 / (result.median_ms / 1000)) };
  }
  if (only.includes("W2")) {
    const result = await repeat(layeredSteps(4, 50, "bench_sleep", (i) => ({ i })));
    workloads.W2 = { ...result, efficiency: round(200 / result.median_ms) };
  }
  if (only.includes("W3")) {
    const result = await repeat(chainSteps(200, "bench_noop"));
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
    node: process.version,
    cpus: os.cpus().length,
  };
  console.log(`\nconfig: ${JSON.stringify(config)}`);
  console.log("workload | median ms | min | max | valid | figure");
  for (const [id, w] of Object.entries(workloads)) {
    const figure = Object.entries(w)
      .filter(([k]) => !["median_ms", "min_ms", "max_ms", "runs", "valid"].includes(k))
      .map(([k, v]) => `${k}=${v}`)
      .join(" ");
    console.log(`${id} | ${w.median_ms ?? "-"} | ${w.min_ms ?? "-"} | ${w.max_ms ?? "-"} | ${w.valid} | ${figure}`);
  }
  await fs.mkdir(path.join(import.meta.dirname, "results"), { recursive: true });
  await fs.writeFile(
    path.join(import.meta.dirname, "results", "latest.json"),
    JSON.stringify({ config, workloads }, null, 2),
  );

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
