/**
 * `npm run bench:fan-out [-- --items 1000] [-- --runs 5]`: a fan-out of `--items` instances against
 * the same steps written out statically — median makespan of each and their ratio (goal ≤ 1.2×).
 *
 * Both plans: a root step returning the list 0…n−1, then n `bench_noop` steps (written out, or one
 * `forEach` template over the root's list), then a join depending on them all. Runs are
 * interleaved, alternating which goes first, after one warm-up of each. On `DATABASE_URL`'s server
 * when set (a scratch database, dropped after), else an embedded one. Prints the figures and
 * writes bench/results/fan-out.json. Nothing here is a test.
 */
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { createAppContext } from "../server/app-context";
import { startRun } from "../server/engine/engine";
import type { StepInput } from "../server/plan-schema";
import { createPlan } from "../server/plans/service";
import { builtinTools, createToolRegistry } from "../server/tools/registry";
import { scratchDatabase } from "./scratch-database";
import { round, stats } from "./stats";
import { benchNoop } from "./tools";

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const ITEMS = option("items", 1_000);
const RUNS = option("runs", 5);
const concurrency = Number(process.env.STEPWISE_WORKER_CONCURRENCY ?? 50);
const tools = createToolRegistry([...builtinTools, benchNoop]);

const root: StepInput = { id: "root", tool: "echo", args: { value: Array.from({ length: ITEMS }, (_, i) => i) } };

function staticSteps(): StepInput[] {
  const steps = Array.from({ length: ITEMS }, (_, i) => ({
    id: `s${i}`,
    tool: "bench_noop",
    args: { i },
    dependsOn: ["root"],
  }));
  return [root, ...steps, { id: "join", tool: "echo", args: { value: "done" }, dependsOn: steps.map((s) => s.id) }];
}

function fanOutSteps(): StepInput[] {
  return [
    root,
    { id: "each", tool: "bench_noop", args: { i: "$item" }, dependsOn: ["root"], forEach: "$root", maxItems: ITEMS },
    { id: "join", tool: "echo", args: { value: "done" }, dependsOn: ["each"] },
  ];
}

async function main() {
  const db = await scratchDatabase("fan_out");
  const app = await createAppContext({
    databaseUrl: db.databaseUrl,
    workspaceRoot: os.tmpdir(),
    worker: { concurrency },
    tools,
  });
  try {
    const plans = {
      static: await createPlan(app.db.prisma, tools, {
        draft: { goal: "static", steps: staticSteps() },
        source: "template",
        author: "bench",
      }),
      fanOut: await createPlan(app.db.prisma, tools, {
        draft: { goal: "fan-out", steps: fanOutSteps() },
        source: "template",
        author: "bench",
      }),
    };
    async function runOnce(planId: string): Promise<{ ms: number; ok: boolean }> {
      const started = performance.now();
      const { runId } = await startRun(app.engine, {
        planId,
        version: 1,
        actor: "bench",
        workspaceRoot: os.tmpdir(),
        maxParallel: 1000,
      });
      for (;;) {
        const row = await app.db.pool.query<{ status: string }>("select status from runs where id = $1", [runId]);
        const status = row.rows[0]!.status;
        if (status === "completed" || status === "failed")
          return { ms: performance.now() - started, ok: status === "completed" };
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
    }
    await runOnce(plans.static.id);
    await runOnce(plans.fanOut.id);
    await app.db.pool.query("analyze");
    const times = { static: [] as number[], fanOut: [] as number[] };
    let ok = true;
    for (let i = 0; i < RUNS; i++) {
      const order = i % 2 === 0 ? (["static", "fanOut"] as const) : (["fanOut", "static"] as const);
      for (const kind of order) {
        const result = await runOnce(plans[kind].id);
        times[kind].push(result.ms);
        ok &&= result.ok;
      }
    }
    const result = {
      items: ITEMS,
      concurrency,
      static: stats(times.static),
      fanOut: stats(times.fanOut),
      ratio: round((stats(times.fanOut).median_ms / stats(times.static).median_ms) * 100) / 100,
      allCompleted: ok,
      loadavg: os.loadavg().map(round),
      cpus: os.cpus().length,
    };
    console.log(JSON.stringify(result, null, 2));
    await fs.mkdir(path.join("bench", "results"), { recursive: true });
    await fs.writeFile(path.join("bench", "results", "fan-out.json"), JSON.stringify(result, null, 2) + "\n");
  } finally {
    await app.close();
    await db.drop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
