import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { createProbeRegistry, readProbeLog } from "../../tests/probe-tool";

/**
 * At most one execution per attempt, counted where it happens: the probe tool appends a line to a
 * file each time it executes, whatever the events say. The engine runs under contention — a lock
 * timeout shortened to 100 ms, a second connection that keeps taking the runs' event-stream locks
 * (so the transaction that records an outcome and claims the dependent times out and is tried
 * again after it already claimed), and a CPU hog beside it — and no step may execute twice.
 */

const RUNS = 50;
const AT_ONCE = 10;
const STEPS = 5;

let harness: Harness | undefined;
let hog: ChildProcess | undefined;
const previousLockTimeout = process.env.STEPWISE_LOCK_TIMEOUT_MS;
const previousProbeLog = process.env.STEPWISE_PROBE_LOG;

beforeAll(async () => {
  process.env.STEPWISE_LOCK_TIMEOUT_MS = "100";
  harness = await startHarness({ concurrency: 4, tools: createProbeRegistry() });
  // Busy-loops until killed: the engine shares the CPU as it does on a loaded machine.
  hog = spawn(process.execPath, ["-e", "for (;;) {}"], { stdio: "ignore" });
});

afterAll(async () => {
  hog?.kill("SIGKILL");
  await harness?.close();
  if (previousLockTimeout === undefined) delete process.env.STEPWISE_LOCK_TIMEOUT_MS;
  else process.env.STEPWISE_LOCK_TIMEOUT_MS = previousLockTimeout;
  // Integration files share a process one after another: leave the environment as it was.
  if (previousProbeLog === undefined) delete process.env.STEPWISE_PROBE_LOG;
  else process.env.STEPWISE_PROBE_LOG = previousProbeLog;
});

/**
 * Until stopped, takes the event-stream locks of `runIds()` for `holdMs` at a time with short gaps:
 * every engine transaction on those runs ends by appending events, so one that meets a held lock
 * has done all its work (claims included) and then times out and is tried again. After each hold
 * it lets go until the engine has recorded something on those runs (or 5 s passed): a fixed short
 * gap starved the engine on a busy machine (at load 40 the test ran past its five minutes), while
 * waiting for progress keeps the contention whatever the machine's speed. `contended()` counts the
 * holds during which a transaction of the engine was seen waiting for the lock — contention that
 * happened, not merely offered (a fast engine finishes a batch in few holds).
 */
function contend(url: string, runIds: () => string[], holdMs: number) {
  let stopped = false;
  let timeouts = 0;
  let contended = 0;
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  const done = (async () => {
    await client.connect();
    while (!stopped) {
      const ids = runIds();
      const recorded = async () =>
        (
          await client.query<{ n: string }>(
            "select coalesce(sum(last_seq), 0) as n from event_streams where id = any($1::text[])",
            [ids],
          )
        ).rows[0]!.n;
      await client.query("begin");
      await client.query("select 1 from event_streams where id = any($1::text[]) for update", [ids]);
      const before = await recorded();
      const until = Date.now() + holdMs;
      let waited = false;
      while (Date.now() < until) {
        await new Promise((resolve) => setTimeout(resolve, 10));
        const waiting = await client.query(
          `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'
             and pid <> pg_backend_pid() limit 1`,
        );
        waited ||= (waiting.rowCount ?? 0) > 0;
      }
      await client.query("commit");
      if (waited) contended++;
      const progressBy = Date.now() + 5_000;
      do await new Promise((resolve) => setTimeout(resolve, 15));
      while (!stopped && ids.length > 0 && (await recorded()) === before && Date.now() < progressBy);
      timeouts++;
    }
    await client.end();
  })();
  return {
    holds: () => timeouts,
    contended: () => contended,
    async stop() {
      stopped = true;
      await done;
    },
  };
}

describe("at most once per attempt", () => {
  it(`${RUNS} chains under contention: no step executes twice`, { timeout: 300_000 }, async () => {
    const h = harness!;
    const probeLog = path.join(h.workspace, "once.log");
    const steps = Array.from({ length: STEPS }, (_, i) => ({
      id: `step_${i + 1}`,
      tool: "probe",
      args: { sleepMs: 20 },
      ...(i > 0 && { dependsOn: [`step_${i}`] }),
    }));
    // The probe reads its log file from the environment at execution time.
    process.env.STEPWISE_PROBE_LOG = probeLog;

    const active: string[] = [];
    const contender = contend(h.app.db.url, () => [...active], 150);
    const runIds: string[] = [];
    try {
      for (let batch = 0; batch < RUNS / AT_ONCE; batch++) {
        const started: string[] = [];
        for (let i = 0; i < AT_ONCE; i++) {
          const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "once", steps }) });
          const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
          started.push(runId);
          active.push(runId);
        }
        runIds.push(...started);
        for (const runId of started) {
          const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 120_000);
          expect(run.status).toBe("completed");
        }
        active.splice(0);
      }
    } finally {
      await contender.stop();
    }

    const executions = await readProbeLog(probeLog);
    const perAttempt = new Map<string, number>();
    for (const e of executions) {
      const key = `${e.runId}/${e.stepId}/${e.attempt}`;
      perAttempt.set(key, (perAttempt.get(key) ?? 0) + 1);
    }
    const doubled = [...perAttempt].filter(([, count]) => count > 1);
    // Every step of every run ran, and none more than once.
    expect(perAttempt.size).toBe(RUNS * STEPS);
    const runsHit = new Set(doubled.map(([key]) => key.split("/")[0])).size;
    expect(doubled, `${doubled.length} attempts in ${runsHit} of ${RUNS} runs executed more than once`).toEqual([]);
    expect(executions).toHaveLength(RUNS * STEPS);
    // The contention was real: engine transactions waited behind the held locks many times.
    expect(contender.contended()).toBeGreaterThan(10);
  });
});
