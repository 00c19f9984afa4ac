import { randomUUID } from "node:crypto";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import {
  createProbeRegistry,
  illegalTransitions,
  readProbeLog,
  readProbeTicks,
  sequenceProblems,
} from "../../tests/probe-tool";
import { LIBFAKETIME, spawnProbeWorker, type ProbeWorkerProcess } from "../../tests/probe-worker";
import { readEvents } from "../events/store";
import { createEngineDeps, LeaseLostError, recoverInterruptedSteps, renewLeases } from "./engine";

/**
 * Leases under faults a worker cannot see coming: its own heartbeat failing while it runs a step,
 * its process frozen past its lease and woken after a peer took the step over, a step's queue job
 * disappearing, and a worker whose wall clock is wrong. Workers are real processes.
 */

let harness: Harness | undefined;
const workers: ProbeWorkerProcess[] = [];
const clients: pg.Client[] = [];
afterEach(async () => {
  await Promise.all(clients.splice(0).map((client) => client.end().catch(() => undefined)));
  await Promise.all(workers.splice(0).map((worker) => worker.kill()));
  await harness?.close();
  harness = undefined;
});

async function createRun(h: Harness, goal: string, steps: unknown[]): Promise<string> {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal, steps }) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return runId;
}

async function startWorker(h: Harness, options: Partial<Parameters<typeof spawnProbeWorker>[0]> = {}) {
  const worker = spawnProbeWorker({
    databaseUrl: h.app.db.url,
    probeLog: path.join(h.workspace, "probe.log"),
    workspace: h.workspace,
    heartbeatMs: 200,
    ...options,
  });
  workers.push(worker);
  await worker.ready;
  return worker;
}

/** The process state letter from /proc (T: stopped). */
const processState = async (pid: number) => (await fs.readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]![0];

async function stepRow(h: Harness, runId: string, stepId = "step_1") {
  const rows = await h.app.db.pool.query<{ status: string; attempt: number; worker_id: string | null }>(
    "select status, attempt, worker_id from run_steps where run_id = $1 and step_id = $2",
    [runId, stepId],
  );
  return rows.rows[0]!;
}

const eventTypes = async (h: Harness, runId: string) =>
  (await readEvents(h.app.db.pool, runId, 0)).map((event) => event.type);

describe("leases", () => {
  it("a worker's recovery never takes its own running attempt, even with its lease and heartbeat lapsed; a peer takes it once the worker is frozen", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const h = harness;
    const probeLog = path.join(h.workspace, "probe.log");
    const w = await startWorker(h, { concurrency: 1 });
    const runId = await createRun(h, "own step", [{ id: "step_1", tool: "probe_once", args: { sleepMs: 120_000 } }]);
    await expect.poll(async () => (await readProbeLog(probeLog)).length, { timeout: 30_000 }).toBe(1);
    const owner = (await stepRow(h, runId)).worker_id!;
    /** One recovery sweep, as the worker `workerId` runs it on each beat. */
    const sweepAs = (workerId: string) =>
      recoverInterruptedSteps({ ...createEngineDeps(h.app.db.pool, h.app.tools), workerId }, 1_000);

    // Its beats and its lease renewals now fail on locks (its worker row, its step's row), while
    // its reads and its sweeps go on: to itself the worker looks dead, yet its attempt is running
    // right here.
    const blocker = new pg.Client({ connectionString: h.app.db.url });
    clients.push(blocker);
    await blocker.connect();
    await blocker.query("begin");
    await blocker.query("select 1 from workers where id = $1 for update", [owner]);
    await blocker.query("select 1 from run_steps where run_id = $1 for update", [runId]);
    await expect
      .poll(
        async () =>
          (
            await h.app.db.pool.query<{ lapsed: boolean }>(
              `select rs.lease_expires_at < now() and w.last_seen < now() - interval '2 seconds' as lapsed
               from run_steps rs join workers w on w.id = rs.worker_id where rs.run_id = $1`,
              [runId],
            )
          ).rows[0]!.lapsed,
        { timeout: 30_000, interval: 200 },
      )
      .toBe(true);
    expect(await sweepAs(owner)).toBe(0);
    expect(await stepRow(h, runId)).toEqual({ status: "running", attempt: 1, worker_id: owner });
    await blocker.query("commit");

    // Its beats get through again and renew the lease: a peer leaves the live attempt alone too.
    // (The beat that waited on the lock stamped the moment it began, so wait for a fresh one.)
    await expect
      .poll(
        async () =>
          (
            await h.app.db.pool.query<{ held: boolean }>(
              `select rs.lease_expires_at > now() and w.last_seen > now() - interval '500 milliseconds' as held
               from run_steps rs join workers w on w.id = rs.worker_id where rs.run_id = $1`,
              [runId],
            )
          ).rows[0]!.held,
        { timeout: 30_000, interval: 100 },
      )
      .toBe(true);
    const peer = randomUUID();
    expect(await sweepAs(peer)).toBe(0);
    expect(await stepRow(h, runId)).toEqual({ status: "running", attempt: 1, worker_id: owner });
    expect(await eventTypes(h, runId)).not.toContain("step.interrupted");
    expect(await readProbeLog(probeLog)).toHaveLength(1);

    // Frozen, it stops renewing: once the lease has really lapsed, a peer's sweep recovers the step.
    w.child.kill("SIGSTOP");
    await expect.poll(() => processState(w.pid), { timeout: 5_000 }).toBe("T");
    await expect
      .poll(
        async () => {
          await sweepAs(peer);
          return (await stepRow(h, runId)).status;
        },
        { timeout: 30_000, interval: 200 },
      )
      .toBe("failed");
    const run = await h.caller.runs.get({ runId });
    expect(run.steps[0]!.reason).toMatch(/^Interrupted/);
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.interrupted").map((e) => e.stepId)).toEqual(["step_1"]);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
  }, 600_000);

  it("a frozen worker whose step was taken over aborts its attempt when it wakes, and nothing it does after is recorded", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const h = harness;
    const probeLog = path.join(h.workspace, "probe.log");
    const a = await startWorker(h, { concurrency: 1 });
    // The first attempt would tick for two minutes; the one that takes over finishes in 5 s.
    const runId = await createRun(h, "taken over", [
      { id: "step_1", tool: "probe", args: { sleepMs: 120_000, retrySleepMs: 5_000, tickMs: 100 } },
    ]);
    const ticksOf = async (pid: number) => (await readProbeTicks(probeLog)).filter((t) => t.pid === pid);
    await expect.poll(async () => (await ticksOf(a.pid)).length, { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
    await expect.poll(() => eventTypes(h, runId), { timeout: 10_000 }).toContain("step.progress");
    a.child.kill("SIGSTOP");
    await expect.poll(() => processState(a.pid), { timeout: 5_000 }).toBe("T");

    const b = await startWorker(h);
    await expect
      .poll(async () => (await readProbeLog(probeLog)).map((e) => `${e.pid}/${e.attempt}`), { timeout: 30_000 })
      .toEqual([`${a.pid}/1`, `${b.pid}/2`]);
    // Woken while attempt 2 runs elsewhere: its next beat finds the lease gone and aborts attempt 1.
    a.child.kill("SIGCONT");
    await expect
      .poll(async () => (await ticksOf(a.pid)).find((t) => t.aborted)?.aborted, { timeout: 15_000 })
      .toMatch(/lost its lease/);

    const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 30_000);
    expect(run.status).toBe("completed");
    expect(run.steps[0]).toMatchObject({ status: "completed", attempt: 2 });
    expect(run.steps[0]!.result).toMatchObject({ ok: true, value: { pid: b.pid, attempt: 2 } });
    // Its side effect stopped at the abort: nothing ticked after it, though it was to go on for minutes.
    const ticks = await ticksOf(a.pid);
    expect(ticks.at(-1)!.aborted).toBeDefined();
    expect(ticks.filter((t) => t.aborted)).toHaveLength(1);
    expect(a.child.exitCode).toBe(null);
    // One completion, and nothing on the stream from attempt 1 once attempt 2 began.
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.completed")).toHaveLength(1);
    const takeover = events.find((e) => e.type === "step.running" && e.data.attempt === 2)!;
    const stale = events.filter(
      (e) => e.seq > takeover.seq && e.type === "step.progress" && String(e.data.message).startsWith("attempt 1 "),
    );
    expect(stale).toEqual([]);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
  }, 600_000);
});

describe("takeover", () => {
  it("a live worker whose heartbeat connection stalls keeps its step; a frozen one loses it to a peer", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const h = harness;
    const probeLog = path.join(h.workspace, "probe.log");
    const holder = await startWorker(h, { concurrency: 1 });
    const runId = await createRun(h, "stalled beat", [
      { id: "step_1", tool: "probe_once", args: { sleepMs: 120_000 } },
    ]);
    await expect.poll(async () => (await readProbeLog(probeLog)).length, { timeout: 30_000 }).toBe(1);
    const owner = (await stepRow(h, runId)).worker_id!;
    const peer = await startWorker(h);

    // Its beats now wait on its worker row, locked here: by the database's clock the heartbeat is
    // stale for several leases (five beats of 200 ms), while its engine connections renew the
    // step's lease. The peer sweeps every 200 ms all along.
    const blocker = new pg.Client({ connectionString: h.app.db.url });
    clients.push(blocker);
    await blocker.connect();
    await blocker.query("begin");
    await blocker.query("select 1 from workers where id = $1 for update", [owner]);
    await expect
      .poll(
        async () =>
          (
            await h.app.db.pool.query<{ stale: boolean }>(
              "select last_seen < now() - interval '3 seconds' as stale from workers where id = $1",
              [owner],
            )
          ).rows[0]!.stale,
        { timeout: 30_000, interval: 200 },
      )
      .toBe(true);
    expect(await stepRow(h, runId)).toEqual({ status: "running", attempt: 1, worker_id: owner });
    expect(await eventTypes(h, runId)).not.toContain("step.interrupted");
    await blocker.query("commit");

    // Frozen, the worker stops both: the peer takes the step once its lease and heartbeat lapse.
    holder.child.kill("SIGSTOP");
    await expect.poll(() => processState(holder.pid), { timeout: 5_000 }).toBe("T");
    await expect.poll(async () => (await stepRow(h, runId)).status, { timeout: 30_000, interval: 200 }).toBe("failed");
    const run = await h.caller.runs.get({ runId });
    expect(run.steps[0]!.reason).toMatch(/^Interrupted/);
    expect(await readProbeLog(probeLog)).toHaveLength(1);
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.interrupted").map((e) => e.stepId)).toEqual(["step_1"]);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
    expect(peer.child.exitCode).toBe(null);
  }, 600_000);
});

describe("recovery beside a busy run", () => {
  it("recovers a dead worker's step of a run whose lock is taken back to back, within a few sweeps", async () => {
    const h = (harness = await startHarness({ worker: false }));
    const runId = await createRun(h, "busy run", [
      { id: "step_1", description: "one", tool: "echo", args: { value: 1 } },
    ]);
    // A worker that died a while ago, its step still running under an expired lease.
    const dead = randomUUID();
    await h.app.db.pool.query(
      "insert into workers (id, hostname, pid, heartbeat_ms, last_seen) values ($1, 'gone', 1, 200, now() - interval '1 minute')",
      [dead],
    );
    await h.app.db.pool.query(
      `update run_steps set status = 'running', attempt = 1, worker_id = $2, lease_expires_at = now() - interval '1 minute'
       where run_id = $1`,
      [runId, dead],
    );
    // The run's lock is never free: two connections take it in turn, each queueing for it while
    // the other holds it for 80 ms, as a run with steps finishing back to back keeps it.
    let stop = false;
    let holds = 0;
    const hammers = [0, 1].map(async () => {
      const busy = new pg.Client({ connectionString: h.app.db.url });
      clients.push(busy);
      await busy.connect();
      while (!stop) {
        await busy.query("begin");
        await busy.query("select 1 from runs where id = $1 for update", [runId]);
        holds++;
        await new Promise((resolve) => setTimeout(resolve, 80));
        await busy.query("commit");
      }
    });
    const hammer = Promise.all(hammers);
    try {
      await expect.poll(() => holds, { timeout: 10_000 }).toBeGreaterThan(2);
      const sweeper = { ...createEngineDeps(h.app.db.pool, h.app.tools), workerId: randomUUID() };
      // Sweeps as a worker's maintenance tick does. Passing the run over whenever its lock is
      // taken, a sweep almost never finds it free; waiting in line briefly, the first few do.
      let sweeps = 0;
      while ((await stepRow(h, runId)).status === "running" && sweeps < 100) {
        await recoverInterruptedSteps(sweeper, 1_000);
        sweeps++;
      }
      expect((await stepRow(h, runId)).status).not.toBe("running");
      expect(sweeps).toBeLessThanOrEqual(5);
      expect(holds).toBeGreaterThan(3);
    } finally {
      stop = true;
      await hammer;
    }
    const events = await eventTypes(h, runId);
    expect(events).toContain("step.interrupted");
  });
});

describe("a lease renewal beside an engine transaction", () => {
  it("never waits for a row the transaction holds, so the two cannot deadlock; the skipped lease is renewed next beat", async () => {
    const h = (harness = await startHarness({ worker: false }));
    const runId = await createRun(h, "renewal beside a held row", [
      { id: "step_1", description: "one", tool: "echo", args: { value: 1 } },
      { id: "step_2", description: "two", tool: "echo", args: { value: 2 } },
    ]);
    const workerId = randomUUID();
    await h.app.db.pool.query("insert into workers (id, hostname, pid, heartbeat_ms) values ($1, 'test', 1, 200)", [
      workerId,
    ]);
    await h.app.db.pool.query(
      "update run_steps set status = 'running', attempt = 1, worker_id = $2, lease_expires_at = now() where run_id = $1",
      [runId, workerId],
    );
    const attempt = (stepId: string) => ({ runId, stepId, attempt: 1, controller: new AbortController() });
    const one = attempt("step_1");
    const two = attempt("step_2");
    const deps = {
      ...createEngineDeps(h.app.db.pool, h.app.tools),
      workerId,
      leaseMs: 60_000,
      // Keyed as the step runner keys them.
      inFlight: new Map([one, two].map((entry) => [`${runId}/${entry.stepId}/1`, entry])),
    };
    const leaseHeld = async (stepId: string) =>
      (
        await h.app.db.pool.query<{ held: boolean }>(
          "select lease_expires_at > now() + interval '30 seconds' as held from run_steps where run_id = $1 and step_id = $2",
          [runId, stepId],
        )
      ).rows[0]!.held;

    // An engine transaction holds step_2's row…
    const engine = new pg.Client({ connectionString: h.app.db.url });
    clients.push(engine);
    await engine.connect();
    await engine.query("begin");
    await engine.query("update run_steps set progress = 50 where run_id = $1 and step_id = 'step_2'", [runId]);
    const renewal = renewLeases(deps);
    const settled = await Promise.race([
      renewal.then(() => "renewed"),
      new Promise((resolve) => setTimeout(() => resolve("still waiting for the lock"), 5_000)),
    ]);
    expect(settled).toBe("renewed");
    // …and then wants step_1's: a renewal holding step_1 while waiting for step_2 made this a deadlock.
    await engine.query("update run_steps set progress = 50 where run_id = $1 and step_id = 'step_1'", [runId]);
    await engine.query("commit");
    expect(await leaseHeld("step_1")).toBe(true);
    expect(await leaseHeld("step_2")).toBe(false);
    // A held row is no sign of a lost lease: neither attempt was aborted, and the next beat renews it.
    expect([one.controller.signal.aborted, two.controller.signal.aborted]).toEqual([false, false]);
    await renewLeases(deps);
    expect(await leaseHeld("step_2")).toBe(true);

    // An attempt taken over by a peer is still found out, locked or not.
    await h.app.db.pool.query("update run_steps set worker_id = $2 where run_id = $1 and step_id = 'step_2'", [
      runId,
      randomUUID(),
    ]);
    await renewLeases(deps);
    expect(two.controller.signal.reason).toBeInstanceOf(LeaseLostError);
    expect(one.controller.signal.aborted).toBe(false);
  });
});

describe("a queued step whose job is gone", () => {
  it("is queued again by the sweep, whether its job was deleted or failed for good; no step runs twice", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const h = harness;
    const probeLog = path.join(h.workspace, "probe.log");
    const runId = await createRun(
      h,
      "lost jobs",
      Array.from({ length: 8 }, (_, i) => ({ id: `step_${i + 1}`, tool: "probe", args: { sleepMs: 300 } })),
    );
    const keyOf = (stepId: string) => `${runId}:${stepId}:1`;
    // An operator cleans the queue of one job; another gave up after the queue's own attempts.
    await h.app.db.pool.query("select graphile_worker.remove_job($1)", [keyOf("step_1")]);
    await h.app.db.pool.query(
      "select graphile_worker.permanently_fail_jobs(array(select id from graphile_worker.jobs where key = $1), 'gave up')",
      [keyOf("step_2")],
    );
    const live = await h.app.db.pool.query<{ key: string }>(
      "select key from graphile_worker.jobs where key like $1 and attempts < max_attempts",
      [`${runId}:%`],
    );
    expect(live.rows.map((row) => row.key).sort()).toEqual(
      Array.from({ length: 6 }, (_, i) => keyOf(`step_${i + 3}`)).sort(),
    );
    // A sweep gives the two steps their jobs back, under their own keys, and leaves the others'
    // alone: a second sweep finds nothing lost and changes no job (a re-added one would get a
    // new revision or id).
    const jobs = async () =>
      (
        await h.app.db.pool.query<{ key: string; id: string; revision: number }>(
          "select key, id, revision from graphile_worker.jobs where key like $1 and attempts < max_attempts",
          [`${runId}:%`],
        )
      ).rows.sort((a, b) => a.key.localeCompare(b.key));
    const sweep = () =>
      recoverInterruptedSteps({ ...createEngineDeps(h.app.db.pool, h.app.tools), workerId: randomUUID() }, 1_000);
    await sweep();
    const swept = await jobs();
    expect(swept.map((job) => job.key)).toEqual(Array.from({ length: 8 }, (_, i) => keyOf(`step_${i + 1}`)).sort());
    expect(swept.map((job) => job.revision)).toEqual(Array(8).fill(0));
    await sweep();
    expect(await jobs()).toEqual(swept);
    // Two slots for eight steps: the sweeps run while most jobs wait in the queue or run.
    await startWorker(h, { concurrency: 2 });
    const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
    expect(run.status).toBe("completed");
    expect(run.steps.map((s) => s.attempt)).toEqual(Array(8).fill(1));
    const executions = (await readProbeLog(probeLog)).map((e) => e.stepId).sort();
    expect(executions).toEqual(Array.from({ length: 8 }, (_, i) => `step_${i + 1}`).sort());
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
  }, 600_000);
});

describe("a worker whose wall clock is wrong", () => {
  it.skipIf(!existsSync(LIBFAKETIME)).each(["+10m", "-10m"])(
    "judges leases by the database's clock at %s: it neither takes a live step nor leaves a dead worker's",
    async (offset) => {
      harness = await startHarness({ worker: false, tools: createProbeRegistry() });
      const h = harness;
      const probeLog = path.join(h.workspace, "probe.log");
      const executedBy = async (pid: number) => (await readProbeLog(probeLog)).filter((e) => e.pid === pid).length;
      // The live owner beats once a minute (a lease of five), so within this test no sweep of its
      // own runs: only the skewed worker judges others.
      const owner = await startWorker(h, { concurrency: 1, heartbeatMs: 60_000 });
      const liveRun = await createRun(h, "live", [{ id: "step_1", tool: "probe_once", args: { sleepMs: 120_000 } }]);
      await expect.poll(() => executedBy(owner.pid), { timeout: 30_000 }).toBe(1);
      const doomed = await startWorker(h, { concurrency: 1 });
      const deadRun = await createRun(h, "dead", [{ id: "step_1", tool: "probe_once", args: { sleepMs: 120_000 } }]);
      await expect.poll(() => executedBy(doomed.pid), { timeout: 30_000 }).toBe(1);
      await doomed.kill();

      await startWorker(h, { clockOffset: offset });
      // Its sweep goes through running steps oldest first: had it taken the live step, it would
      // have done so before it recovered the dead worker's.
      await expect.poll(async () => (await stepRow(h, deadRun)).status, { timeout: 30_000 }).toBe("failed");
      expect(await stepRow(h, liveRun)).toMatchObject({ status: "running", attempt: 1 });
      expect(await eventTypes(h, liveRun)).not.toContain("step.interrupted");
      expect((await h.caller.runs.get({ runId: deadRun })).steps[0]!.reason).toMatch(/^Interrupted/);
      await h.caller.runs.cancel({ runId: liveRun });
    },
    600_000,
  );
});
