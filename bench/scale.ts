/**
 * `npm run bench:scale [-- --quick] [-- --skip pages,floors]`: where one PostgreSQL tops out.
 * Runs the other benches as child processes, one after another, on the same server (embedded
 * unless DATABASE_URL), and collects their results into one table and bench/results/scale.json:
 *
 *  - sizes:       one run of 1k, 5k and 20k steps (W1's layered shape), one worker process;
 *  - runs:        100 runs of 50 steps started together, two worker processes;
 *  - workers:     10 runs × 500 steps with 1, 2 and 4 worker processes, 5 subscribers each;
 *  - subscribers: a live view of 50 subscribers following one 1,000-step run;
 *  - floors:      W2 and W3 beside the hand-written PostgreSQL loop (bench/run.ts --baseline);
 *  - pages:       the run list, inbox and audit page over a million events (bench/retention.ts).
 *
 * Each load row says steps/s, event delivery p50/p99, WAL bytes per step (the whole server's
 * write-ahead log over the run, so other work on a shared server shows up here) and the peak
 * connections to the bench database. `--quick` shrinks every shape (a smoke run of the harness).
 * Nothing here is a test: it asserts nothing about time. docs/scaling.md reads these figures.
 */
import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { round } from "./stats";

const args = process.argv.slice(2);
const quick = args.includes("--quick");
const skip = new Set(args.includes("--skip") ? args[args.indexOf("--skip") + 1]!.split(",") : []);
const results = path.join(import.meta.dirname, "results");
const root = path.join(import.meta.dirname, "..");

interface LoadShape {
  group: string;
  runs: number;
  steps: number;
  workers: number;
  subscribers: number;
}

const scale = (n: number) => (quick ? Math.max(1, Math.ceil(n / 20)) : n);
const loadShapes: LoadShape[] = [
  ...[1000, 5000, 20000].map((steps) => ({ group: "sizes", runs: 1, steps: scale(steps), workers: 1, subscribers: 1 })),
  { group: "runs", runs: scale(100), steps: 50, workers: 2, subscribers: 1 },
  ...[1, 2, 4].map((workers) => ({ group: "workers", runs: scale(10), steps: 500, workers, subscribers: 5 })),
  { group: "subscribers", runs: 1, steps: scale(1000), workers: 2, subscribers: quick ? 5 : 50 },
];

/** Runs a bench file with tsx; resolves with its exit code (its output goes to ours). */
function runBench(file: string, benchArgs: string[]): Promise<number> {
  console.log(`\n▶ ${file} ${benchArgs.join(" ")}`);
  const child = spawn(process.execPath, ["--import", "tsx", file, ...benchArgs], { cwd: root, stdio: "inherit" });
  return new Promise((resolve) => child.on("exit", (code) => resolve(code ?? 1)));
}

async function readJson(file: string): Promise<Record<string, unknown> | undefined> {
  return JSON.parse(await fs.readFile(file, "utf8").catch(() => "null")) ?? undefined;
}

async function main() {
  await fs.mkdir(results, { recursive: true });
  const loadBefore = os.loadavg().map(round);
  const load: Array<LoadShape & Record<string, unknown>> = [];
  for (const shape of loadShapes.filter((shape) => !skip.has(shape.group))) {
    const out = path.join(results, `scale-${shape.group}-${shape.runs}x${shape.steps}-w${shape.workers}.json`);
    const code = await runBench("bench/load.ts", [
      "--runs",
      String(shape.runs),
      "--steps",
      String(shape.steps),
      "--workers",
      String(shape.workers),
      "--subscribers",
      String(shape.subscribers),
      "--out",
      out,
    ]);
    load.push({ ...shape, exit: code, ...((code === 0 && (await readJson(out))) || {}) });
    await fs.rm(out, { force: true });
  }
  let floors: Record<string, unknown> | undefined;
  if (!skip.has("floors")) {
    const code = await runBench("bench/run.ts", ["--baseline", "--only", "W2,W3", "--runs", quick ? "2" : "5"]);
    floors = code === 0 ? await readJson(path.join(results, "latest.json")) : { exit: code };
  }
  let pages: Record<string, unknown> | undefined;
  if (!skip.has("pages")) {
    const events = quick ? "50000" : "1000000";
    const code = await runBench("bench/retention.ts", ["--events", events, "--runs", quick ? "200" : "2000"]);
    pages = code === 0 ? await readJson(path.join(results, "retention.json")) : { exit: code };
  }

  console.log(
    "\ngroup | runs × steps | workers | subscribers | steps/s | makespan ms | delivery p50/p99 ms | WAL B/step | peak conns | lost/dup",
  );
  for (const row of load) {
    console.log(
      [
        row.group,
        `${row.runs} × ${row.steps}`,
        row.workers,
        row.subscribers,
        row.steps_per_s ?? `exit ${row.exit}`,
        row.makespan_ms ?? "-",
        `${row.delivery_p50_ms ?? "-"}/${row.delivery_p99_ms ?? "-"}`,
        row.wal_bytes_per_step ?? "-",
        row.peak_connections ?? "-",
        `${row.lost ?? "-"}/${row.duplicated ?? "-"}`,
      ].join(" | "),
    );
  }
  const report = {
    config: {
      database: process.env.DATABASE_URL ? "external" : "embedded",
      quick,
      node: process.version,
      cpus: os.cpus().length,
      load_average: { before: loadBefore, after: os.loadavg().map(round) },
    },
    load,
    floors,
    pages,
  };
  await fs.writeFile(path.join(results, "scale.json"), JSON.stringify(report, null, 2));
  console.log(
    `\nwrote bench/results/scale.json (load average before ${loadBefore.join(" ")}, after ${report.config.load_average.after.join(" ")})`,
  );
  if (load.some((row) => row.exit !== 0)) process.exit(1);
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
