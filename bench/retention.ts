/**
 * `npm run bench:retention [-- --events 1000000] [-- --runs 2000] [-- --audit 50000] [-- --repeats 15]`:
 * the pages that list things, on a database holding a year of runs, before and after a retention
 * pass (server/ops/retention.ts), and the pass itself.
 *
 * Seeds with SQL (generate_series), not through the engine: `--runs` runs of one approved plan
 * sharing `--events` events (every other one a step log), 70% of them finished 100–400 days ago,
 * 29% finished in the last days and 1% still running with a step waiting for approval (the inbox); and
 * `--audit` audit entries (written without their chain hashes: nothing here verifies the chain).
 * Then, before and after a pass with a 90-day age in batches of 1,000, the median of `--repeats`
 * reads of the run list's first page (all runs, and finished ones), the inbox and the audit page's
 * first page (and once more after `vacuum analyze events`); and the pass's duration, transactions
 * and longest transaction.
 *
 * On `DATABASE_URL`'s server when set (a scratch database, dropped after), else an embedded one.
 * Prints a table and writes bench/results/retention.json. Nothing here is a test.
 */
import fs from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { createAppContext } from "../server/app-context";
import { listAuditEntries } from "../server/audit/audit-log";
import { listRunSummaries } from "../server/engine/run-list";
import { listInbox } from "../server/inbox/inbox";
import { runRetentionPass } from "../server/ops/retention";
import type { ToolRegistry } from "../server/tools/registry";
import { createTrpcContext } from "../server/trpc/init";
import { createCaller } from "../server/trpc/root";
import { scratchDatabase } from "./scratch-database";
import { round, stats } from "./stats";

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const EVENTS = option("events", 1_000_000);
const RUNS = option("runs", 2_000);
const AUDIT = option("audit", 50_000);
const REPEATS = option("repeats", 15);
const BATCH = option("batch", 1_000);

async function timed(fn: () => Promise<unknown>): Promise<number> {
  const started = performance.now();
  await fn();
  return performance.now() - started;
}

/** The queries behind the runs page, the inbox and the audit page, each read `REPEATS` times. */
async function measurePages(pool: pg.Pool, tools: ToolRegistry) {
  const pages: Record<string, () => Promise<unknown>> = {
    "run list (all)": () => listRunSummaries(pool, { limit: 50 }),
    "run list (finished)": () => listRunSummaries(pool, { limit: 50, statuses: ["completed", "failed"] }),
    inbox: () => listInbox(pool, tools),
    "audit page": () => listAuditEntries(pool, { limit: 50 }),
  };
  const result: Record<string, ReturnType<typeof stats>> = {};
  for (const [name, read] of Object.entries(pages)) {
    await read(); // warm the plan cache and the buffers once
    const samples: number[] = [];
    for (let i = 0; i < REPEATS; i++) samples.push(await timed(read));
    result[name] = stats(samples);
  }
  return result;
}

/** Runs, their one step, their events and streams, and audit entries, all copied from `template`'s plan. */
async function seed(pool: pg.Pool, template: string) {
  const perRun = Math.max(1, Math.floor(EVENTS / RUNS));
  // A run's place decides its age and state: 1–7 of every 10 old and finished, the rest recent, and
  // one in a hundred still running with a step waiting for approval.
  await pool.query(
    `insert into runs (id, plan_id, plan_version, status, trace_id, approved_by, workspace_root, workspace_id,
                       open_steps, created_at, started_at, finished_at)
     select md5('run' || g)::uuid, t.plan_id, t.plan_version,
            case when g % 100 = 0 then 'running' when g % 10 = 7 then 'failed' else 'completed' end,
            t.trace_id, t.approved_by, t.workspace_root, t.workspace_id, case when g % 100 = 0 then 1 else 0 end,
            c.at, c.at, case when g % 100 = 0 then null else c.at + interval '5 minutes' end
       from generate_series(1, $1::int) g
       cross join (select * from runs where id = $2) t
       cross join lateral (select case when g % 10 between 1 and 7
                                       then now() - make_interval(days => 100 + (g % 300))
                                       else now() - make_interval(mins => g) end as at) c`,
    [RUNS, template],
  );
  await pool.query(
    `insert into run_steps (run_id, step_id, position, tool, status, depends_on, attempt, result, waiting, finished_at)
     select md5('run' || g)::uuid, 'step_1', 0, 'echo',
            case when g % 100 = 0 then 'awaiting_approval' else 'completed' end, '{}', 1,
            case when g % 100 = 0 then null else '{"output": {"value": 1}}'::jsonb end,
            case when g % 100 = 0 then jsonb_build_object('kind', 'approval', 'expiresAt', now() + interval '1 day') end,
            case when g % 100 = 0 then null else now() end
       from generate_series(1, $1::int) g`,
    [RUNS],
  );
  const planId = (await pool.query<{ plan_id: string }>("select plan_id from runs where id = $1", [template])).rows[0]!
    .plan_id;
  // A hundred runs' events per statement: one statement for a million rows outlasts the pool's
  // 60 s query timeout on a busy machine.
  for (let from = 1; from <= RUNS; from += 100) {
    await pool.query(
      `insert into events (stream_id, seq, type, plan_id, run_id, step_id, trace_id, data, created_at)
     select md5('run' || g)::uuid::text, s, case when s % 2 = 0 then 'step.log' else 'step.progress' end, $3,
            md5('run' || g)::uuid, 'step_1', 't',
            case when s % 2 = 0
              then jsonb_build_object('lines', jsonb_build_array(jsonb_build_object(
                     'message', 'compiling module ' || s || ' of the build, warnings: none', 'level', 'info', 'at', now())))
              else jsonb_build_object('progress', s % 100) end,
            now()
       from generate_series($4::int, least($1::int, $4::int + 99)) g, generate_series(1, $2::int) s`,
      [RUNS, perRun, planId, from],
    );
  }
  await pool.query(
    "insert into event_streams (id, last_seq) select md5('run' || g)::uuid::text, $2 from generate_series(1, $1::int) g",
    [RUNS, perRun],
  );
  await pool.query(
    `insert into audit_entries (actor, actor_kind, action, plan_id, plan_version, run_id, step_id, detail, seq, created_at)
     select 'bench', 'person', 'run.cancelled', $2, 1, md5('run' || (1 + g % $3::int))::uuid, null, '{}',
            (select max(seq) from audit_entries) + g, now() - make_interval(mins => $1::int - g)
       from generate_series(1, $1::int) g`,
    [AUDIT, planId, RUNS],
  );
  await pool.query("vacuum analyze events");
  await pool.query("analyze");
  return RUNS * perRun;
}

async function main() {
  const scratch = await scratchDatabase("retention");
  const app = await createAppContext({
    databaseUrl: scratch.databaseUrl,
    workspaceRoot: scratch.scratch,
    worker: false,
  });
  try {
    const caller = createCaller(createTrpcContext(app, { kind: "person", name: "bench" }));
    const plan = await caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "Retention bench",
        steps: [{ id: "step_1", description: "echo", tool: "echo", args: { value: 1 } }],
      }),
    });
    const { runId } = await caller.plans.approve({ planId: plan.id, version: plan.version });
    const seedStarted = performance.now();
    const events = await seed(app.db.pool, runId);
    const seedMs = performance.now() - seedStarted;
    console.log(`seeded ${events} events over ${RUNS} runs and ${AUDIT} audit entries in ${round(seedMs / 1000)} s`);

    const before = await measurePages(app.db.pool, app.tools);
    const passStarted = performance.now();
    const report = await runRetentionPass(app.db.pool, { olderThanDays: 90, batchSize: BATCH });
    const passMs = performance.now() - passStarted;
    const after = await measurePages(app.db.pool, app.tools);
    // Once more after the vacuum that autovacuum would run on its own, which may be busy with the
    // pass's dead rows while `after` is read.
    await app.db.pool.query("vacuum analyze events");
    await app.db.pool.query("analyze runs");
    const vacuumed = await measurePages(app.db.pool, app.tools);
    const left = await app.db.pool.query<{ n: number }>("select count(*)::int as n from events");

    console.log("\npage                  before (median ms)   after (median ms)   after a vacuum");
    for (const name of Object.keys(before)) {
      const columns = [before, after, vacuumed].map((page, i) =>
        String(page[name]!.median_ms).padStart([17, 20, 17][i]!),
      );
      console.log(`${name.padEnd(22)}${columns.join("")}`);
    }
    console.log(
      `\npass: ${report.runs} runs, ${report.events} events in ${round(passMs / 1000)} s, ` +
        `${report.transactions} transactions, longest ${round(report.longestTransactionMs)} ms; ${left.rows[0]!.n} events left`,
    );
    const result = {
      events,
      runs: RUNS,
      auditEntries: AUDIT,
      batch: BATCH,
      seedMs: Math.round(seedMs),
      before,
      after,
      vacuumed,
      pass: { ...report, longestTransactionMs: round(report.longestTransactionMs), ms: Math.round(passMs) },
      eventsLeft: left.rows[0]!.n,
    };
    await fs.mkdir(path.join("bench", "results"), { recursive: true });
    await fs.writeFile(path.join("bench", "results", "retention.json"), `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await app.close();
    await scratch.drop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
