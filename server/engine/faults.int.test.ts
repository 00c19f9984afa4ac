import { execFileSync, spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { createProbeRegistry, illegalTransitions, readProbeLog, sequenceProblems } from "../../tests/probe-tool";
import { spawnProbeWorker, type ProbeWorkerProcess } from "../../tests/probe-worker";
import { startProxyToDatabase, throughProxy, type TcpProxy } from "../../tests/tcp-proxy";
import { readEvents } from "../events/store";
import { builtinTools, createToolRegistry } from "../tools/registry";
import { defineTool } from "../tools/types";
import { createEngineDeps } from "./engine";
import { createAppContext } from "../app-context";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";
import { startStepWorker, type StepWorker } from "./worker";
import { processAlive } from "../cli/connection-file";
import { REPEATED_SIGNAL_MS } from "../cli/serve";
import { programCommand } from "../../tests/program-command";

/**
 * Database faults injected into a live engine: backends terminated mid-transaction (what a
 * PostgreSQL restart or failover does to every connection) and a graceful shutdown. The invariants
 * after each: the process is still alive (vitest fails on an uncaught error), every run reaches a
 * terminal state, each step has one terminal outcome, and events are gap-free.
 */

let harness: Harness | undefined;
const workers: StepWorker[] = [];
let child: ChildProcess | undefined;
const probeWorkers: ProbeWorkerProcess[] = [];
let proxy: TcpProxy | undefined;
afterEach(async () => {
  await Promise.all(probeWorkers.splice(0).map((worker) => worker.kill()));
  await proxy?.close();
  proxy = undefined;
  // The worker runs in its own process group (under faketime it is a child of the wrapper):
  // kill the whole group, or an orphaned worker outlives the test, retrying a database that is gone.
  if (child?.pid) {
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  child = undefined;
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ graceMs: 0 })));
  await harness?.close();
  harness = undefined;
});

/** Terminates every other connection to the test database, as a server restart would. */
async function terminateBackends(databaseUrl: string): Promise<number> {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const result = await client.query(
      `select pg_terminate_backend(pid) from pg_stat_activity
       where datname = current_database() and pid <> pg_backend_pid()`,
    );
    return result.rowCount ?? 0;
  } finally {
    await client.end();
  }
}

/**
 * A harness without a worker, and a probe worker (beating every 200 ms unless told otherwise)
 * that reaches the database through a TCP proxy of its own, for faults between the two.
 */
async function probeWorkerThroughProxy(options: { heartbeatMs?: number } = {}): Promise<{
  h: Harness;
  proxy: TcpProxy;
  probeLog: string;
  worker: ProbeWorkerProcess;
}> {
  harness = await startHarness({ worker: false, tools: createProbeRegistry() });
  const h = harness;
  const started = await startProxyToDatabase(h.app.db.url);
  proxy = started;
  const probeLog = path.join(h.workspace, "probe.log");
  const worker = spawnProbeWorker({
    databaseUrl: throughProxy(h.app.db.url, started),
    probeLog,
    workspace: h.workspace,
    heartbeatMs: options.heartbeatMs ?? 200,
  });
  probeWorkers.push(worker);
  await worker.ready;
  return { h, proxy: started, probeLog, worker };
}

/**
 * Each of `runs`' steps executed exactly once (`count` in all), its events gap-free and legal, and
 * none interrupted: nothing was recovered behind the live worker's back.
 */
async function expectEachStepRanOnce(h: Harness, probeLog: string, runs: string[], count: number) {
  const executions = (await readProbeLog(probeLog)).map((e) => `${e.runId}/${e.stepId}`);
  expect(executions.length).toBe(count);
  expect(new Set(executions).size).toBe(count);
  for (const runId of runs) {
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
    expect(events.filter((e) => e.type === "step.interrupted")).toEqual([]);
  }
}

async function createRun(h: Harness, goal: string, steps: unknown[]): Promise<string> {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal, steps }) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return runId;
}

async function expectGapFreeWithOneOutcomePerStep(h: Harness, runId: string, stepCount: number) {
  const events = await readEvents(h.app.db.pool, runId, 0);
  expect(events.map((event) => event.seq)).toEqual(events.map((_, index) => index + 1));
  const completions = events.filter((event) => event.type === "step.completed").map((event) => event.stepId);
  expect(completions.length).toBe(stepCount);
  expect(new Set(completions).size).toBe(stepCount);
}

const chain = (length: number, ms: number) =>
  Array.from({ length }, (_, i) => ({
    id: `step_${i + 1}`,
    description: `Sleep ${i + 1}`,
    tool: "sleep",
    args: { ms },
    dependsOn: i ? [`step_${i}`] : [],
  }));

describe("engine under database faults", () => {
  it("terminated connections mid-run neither kill the process nor strand a step; every run completes", async () => {
    harness = await startHarness({ concurrency: 4 });
    const h = harness;
    // Many short steps keep transactions open on most connections, so terminations land both
    // inside statements and between the statements of a checked-out client.
    const fan = (n: number) =>
      Array.from({ length: n }, (_, i) => ({ id: `step_${i + 1}`, tool: "echo", args: { value: i } }));
    const runs = await Promise.all([
      createRun(h, "chain one", chain(20, 40)),
      createRun(h, "chain two", chain(20, 40)),
      createRun(h, "fan one", fan(60)),
      createRun(h, "fan two", fan(60)),
    ]);
    let terminated = 0;
    for (let round = 0; round < 20; round++) {
      await new Promise((resolve) => setTimeout(resolve, 40));
      terminated += await terminateBackends(h.app.db.url);
    }
    expect(terminated).toBeGreaterThan(0);
    for (const runId of runs) {
      const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 45_000);
      expect(run.status).toBe("completed");
    }
    await expectGapFreeWithOneOutcomePerStep(h, runs[0]!, 20);
    await expectGapFreeWithOneOutcomePerStep(h, runs[1]!, 20);
    await expectGapFreeWithOneOutcomePerStep(h, runs[2]!, 60);
    await expectGapFreeWithOneOutcomePerStep(h, runs[3]!, 60);

    // The event bus came back too: a run started after the faults is still streamed live.
    const received: string[] = [];
    const after = await createRun(h, "after the faults", chain(2, 10));
    const unsubscribe = h.app.bus.subscribe(after, (events) => received.push(...events.map((e) => e.type)));
    await h.waitForRun(after);
    await expect.poll(() => received.includes("run.completed"), { timeout: 10_000 }).toBe(true);
    unsubscribe();
  }, 600_000);

  it("a cancel decided after the worker's listener lost its connection still aborts the running command", async () => {
    const aborted: string[] = [];
    const blocking = defineTool({
      name: "block",
      description: "Waits until aborted.",
      inputSchema: z.object({}),
      outputSchema: z.object({}),
      capability: "time.wait",
      capabilityLabel: "Wait",
      readOnly: true,
      destructive: false,
      idempotent: false,
      requiresApproval: false,
      defaultTimeoutSeconds: 120,
      execute: (_input, context) =>
        new Promise((_resolve, reject) => {
          context.signal.addEventListener("abort", () => {
            aborted.push(context.stepId);
            reject(context.signal.reason);
          });
        }),
    });
    const tools = createToolRegistry([...builtinTools, blocking]);
    harness = await startHarness({ worker: false, tools });
    const h = harness;
    // A worker with engine state of its own: only the cancel NOTIFY can reach its running step.
    const worker = await startStepWorker(createEngineDeps(h.app.db.pool, tools), {
      databaseUrl: h.app.db.url,
      concurrency: 2,
    });
    workers.push(worker);
    const runId = await createRun(h, "blocked", [{ id: "step_1", tool: "block", args: {} }]);
    await expect
      .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 15_000 })
      .toBe("running");
    expect(await terminateBackends(h.app.db.url)).toBeGreaterThan(0);
    // The listener reconnects with backoff; a cancel notified before it is back would be missed,
    // which is why cancelled steps are also re-checked when their outcome is recorded.
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await h.caller.runs.cancel({ runId });
    // A cancel the listener missed is still found by the worker's next lease renewal (the step
    // is no longer running): a heartbeat or two, however late a busy machine runs it.
    await expect.poll(() => aborted, { timeout: 60_000 }).toEqual(["step_1"]);
    expect((await h.caller.runs.get({ runId })).status).toBe("cancelled");
  });

  it("a graceful stop lets an in-flight step finish and keeps heartbeating, so no peer calls it interrupted", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const worker = await startStepWorker(h.app.engine, { databaseUrl: h.app.db.url, concurrency: 1, heartbeatMs: 100 });
    const runId = await createRun(h, "in flight", [{ id: "step_1", tool: "sleep", args: { ms: 2000 } }]);
    await expect
      .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 15_000 })
      .toBe("running");
    // A peer with a short heartbeat that would recover the step if its owner stopped beating.
    const peer = await startStepWorker(createEngineDeps(h.app.db.pool, h.app.tools), {
      databaseUrl: h.app.db.url,
      concurrency: 1,
      heartbeatMs: 100,
    });
    workers.push(peer);
    await worker.stop({ graceMs: 10_000 });
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(events.map((event) => event.type)).not.toContain("step.interrupted");
    const run = await h.caller.runs.get({ runId });
    expect(run.steps[0]!.status).toBe("completed");
    expect(run.status).toBe("completed");
  });

  it("a step still running when the grace period ends is aborted and given back, to run again uncounted", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const worker = await startStepWorker(h.app.engine, { databaseUrl: h.app.db.url, concurrency: 1, heartbeatMs: 100 });
    const runId = await createRun(h, "too long", [{ id: "step_1", tool: "sleep", args: { ms: 60_000 } }]);
    await expect
      .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 15_000 })
      .toBe("running");
    await worker.stop({ graceMs: 200 });
    // The sleep settled with its abort: its attempt goes back to ready, not to recovery.
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(events.map((event) => event.type)).not.toContain("step.interrupted");
    expect(events.find((event) => event.type === "step.retrying")?.data).toMatchObject({
      attempt: 1,
      interrupted: true,
    });
    expect((await h.caller.runs.get({ runId })).steps[0]!.status).toBe("ready");
    // A new worker runs the same attempt again.
    const next = await startStepWorker(createEngineDeps(h.app.db.pool, h.app.tools), {
      databaseUrl: h.app.db.url,
      concurrency: 1,
      heartbeatMs: 100,
    });
    workers.push(next);
    await expect
      .poll(async () => (await h.caller.runs.get({ runId })).steps[0], { timeout: 15_000 })
      .toMatchObject({ status: "running", attempt: 1 });
    await h.caller.runs.cancel({ runId });
  });

  describe("a worker process and its signals", () => {
    function startWorkerProcess(
      h: Harness,
      options: { clockOffset?: string } = {},
    ): { process: ChildProcess; exited: Promise<number | null>; output: () => string } {
      let output = "";
      const command = programCommand("server/cli/main.ts", ["worker"]);
      // libfaketime shifts the worker's wall clock only; timers (monotonic) run normally.
      const argv = options.clockOffset ? ["faketime", "-f", options.clockOffset, ...command] : command;
      const worker = spawn(argv[0]!, argv.slice(1), {
        env: {
          ...process.env,
          DATABASE_URL: h.app.db.url,
          STEPWISE_WORKSPACE: h.workspace,
          STEPWISE_HEARTBEAT_MS: "200",
          STEPWISE_SHUTDOWN_GRACE_MS: "20000",
          FAKETIME_DONT_FAKE_MONOTONIC: "1",
        },
        stdio: ["ignore", "pipe", "pipe"],
        detached: true,
      });
      worker.stdout!.on("data", (chunk) => (output += chunk));
      worker.stderr!.on("data", (chunk) => (output += chunk));
      child = worker;
      const exited = new Promise<number | null>((resolve) => worker.on("exit", (code) => resolve(code)));
      return { process: worker, exited, output: () => output };
    }

    it("one SIGTERM, even delivered twice at once as a relayed Ctrl-C is, lets the running step finish first", async () => {
      harness = await startHarness({ worker: false });
      const h = harness;
      const worker = startWorkerProcess(h);
      // Long enough to be seen running however slowly the poll goes on a busy machine.
      const runId = await createRun(h, "finish me", [{ id: "step_1", tool: "sleep", args: { ms: 8_000 } }]);
      // The worker process compiles the server as it starts: minutes on a very busy machine.
      await expect
        .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 400_000 })
        .toBe("running");
      // A terminal's Ctrl-C reaches the process itself and again through npm and tsx.
      worker.process.kill("SIGTERM");
      worker.process.kill("SIGTERM");
      expect(await worker.exited).toBe(0);
      const run = await h.caller.runs.get({ runId });
      expect(run.steps[0]!.status).toBe("completed");
      expect((await readEvents(h.app.db.pool, runId, 0)).map((event) => event.type)).not.toContain("step.interrupted");
    }, 600_000);

    it("a second SIGTERM exits at once, leaving the running step to recovery", async () => {
      harness = await startHarness({ worker: false });
      const h = harness;
      const worker = startWorkerProcess(h);
      const runId = await createRun(h, "leave me", [{ id: "step_1", tool: "sleep", args: { ms: 60_000 } }]);
      await expect
        .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 400_000 })
        .toBe("running");
      worker.process.kill("SIGTERM");
      await expect.poll(() => worker.output(), { timeout: 10_000 }).toContain("shutting down");
      // The person's second press comes after the copies of the first.
      await new Promise((resolve) => setTimeout(resolve, REPEATED_SIGNAL_MS + 200));
      worker.process.kill("SIGTERM");
      expect(await worker.exited).toBe(130);
      expect(worker.output()).toContain("exiting now");
      await h.caller.runs.cancel({ runId });
    }, 600_000);

    it("a SIGKILLed worker's shell command dies with it, children and all", async () => {
      harness = await startHarness({ worker: false });
      const h = harness;
      const worker = startWorkerProcess(h);
      const file = (name: string) => path.join(h.workspace, name);
      // The shell itself, a background child that would leave a mark later, a child that left the
      // process group (setsid), and a loop that would keep writing: none may outlive the worker.
      // Pids are read from /proc/self/stat: the command has a PID namespace of its own, where $$
      // and $! are not the pids this test sees.
      const hostPid = (file: string) => `read -r p _ < /proc/self/stat; echo $p > ${file}`;
      const command =
        `${hostPid("shell.pid")}; (${hostPid("child.pid")}; sleep 3; touch late-marker) & ` +
        `setsid bash -c '${hostPid("setsid.pid")}; exec sleep 1000' & ` +
        "while true; do echo tick >> ticks.txt; sleep 0.1; done";
      const runId = await createRun(h, "outlive me", [{ id: "step_1", tool: "shell", args: { command } }]);
      await expect
        .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 400_000 })
        .toBe("awaiting_approval");
      await h.caller.runs.decide({ runId, stepId: "step_1", approve: true });
      const pidIn = async (name: string) => Number((await fs.readFile(file(name), "utf8").catch(() => "")).trim());
      await expect
        .poll(
          async () =>
            (await pidIn("shell.pid")) > 0 && (await pidIn("child.pid")) > 0 && (await pidIn("setsid.pid")) > 0,
          { timeout: 30_000 },
        )
        .toBe(true);
      const pids = [await pidIn("shell.pid"), await pidIn("child.pid"), await pidIn("setsid.pid")];
      expect(pids.every(processAlive)).toBe(true);
      worker.process.kill("SIGKILL");
      await worker.exited;
      await expect.poll(() => pids.filter(processAlive), { timeout: 5_000 }).toEqual([]);
      const ticks = await fs.readFile(file("ticks.txt"), "utf8");
      // Past the moment the background child would have touched its marker.
      await new Promise((resolve) => setTimeout(resolve, 3_500));
      expect(await fs.readFile(file("ticks.txt"), "utf8")).toBe(ticks);
      await expect(fs.access(file("late-marker"))).rejects.toThrow();
      expect((await h.caller.runs.get({ runId })).steps[0]!.status).toBe("running");
      await h.caller.runs.cancel({ runId });
    }, 600_000);

    const hasFaketime = (() => {
      try {
        execFileSync("faketime", ["-f", "+0", "true"]);
        return true;
      } catch {
        return false;
      }
    })();

    it.skipIf(!hasFaketime)(
      "a worker whose clock is 10 minutes behind neither expires a gate early nor stamps events in the past",
      async () => {
        harness = await startHarness({ worker: false });
        const h = harness;
        startWorkerProcess(h, { clockOffset: "-10m" });
        const plan = await h.caller.plans.createFromJson({
          planJson: JSON.stringify({
            goal: "gate on a late clock",
            // The gate opens in the worker's transaction, after the step it depends on completes there.
            steps: [
              { id: "step_1", tool: "echo", args: { value: 1 } },
              { id: "step_2", tool: "echo", args: { value: 2 }, approvalRequired: true, dependsOn: ["step_1"] },
            ],
          }),
        });
        const { runId } = await h.caller.plans.approve({
          planId: plan.id,
          version: plan.version,
          approvalTimeoutSeconds: 60,
          approvalWarningSeconds: 10,
        });
        await expect
          .poll(async () => (await h.caller.runs.get({ runId })).steps[1]!.status, { timeout: 400_000 })
          .toBe("awaiting_approval");
        // Long enough for a wrongly computed (already past) expiry to have fired.
        await new Promise((resolve) => setTimeout(resolve, 2_000));
        const run = await h.caller.runs.get({ runId });
        expect(run.steps[1]!.status).toBe("awaiting_approval");
        const { db_now } = (await h.app.db.pool.query<{ db_now: Date }>("select now() as db_now")).rows[0]!;
        const events = await readEvents(h.app.db.pool, runId, 0);
        const requested = events.find((event) => event.type === "approval.requested")!;
        const expiresAt = new Date((requested.data as { expiresAt: string }).expiresAt).getTime();
        expect(expiresAt - db_now.getTime()).toBeGreaterThan(40_000);
        expect(expiresAt - db_now.getTime()).toBeLessThan(70_000);
        for (const event of events) {
          expect(Math.abs(new Date(event.createdAt).getTime() - db_now.getTime())).toBeLessThan(60_000);
        }
        await h.caller.runs.cancel({ runId });
      },
      60_000,
    );
  });
  describe("an interrupted step says whether its effect may have happened", () => {
    it("a step killed before its command started is safe to retry; one killed after may have run", async () => {
      harness = await startHarness({ worker: false, tools: createProbeRegistry() });
      const h = harness;
      const probeLog = path.join(h.workspace, "probe.log");
      const runId = await createRun(h, "effects", [
        // Still preparing (its effect's start not yet marked) when the worker dies.
        { id: "step_1", tool: "probe_effect", args: { sleepBeforeEffectMs: 60_000 } },
        // Marked its effect's start and recorded its execution, then dies mid-way.
        { id: "step_2", tool: "probe_effect", args: { sleepMs: 60_000 } },
        // A tool that does not mark the start: its effect counts as begun once it is claimed.
        { id: "step_3", tool: "probe_once", args: { sleepMs: 60_000 } },
      ]);
      const first = spawnProbeWorker({ databaseUrl: h.app.db.url, probeLog, workspace: h.workspace });
      probeWorkers.push(first);
      await first.ready;
      await expect
        .poll(async () => (await readProbeLog(probeLog)).map((e) => e.stepId).sort(), { timeout: 30_000 })
        .toEqual(["step_2", "step_3"]);
      expect((await h.caller.runs.get({ runId })).steps.map((s) => s.status)).toEqual([
        "running",
        "running",
        "running",
      ]);
      await first.kill();

      const second = spawnProbeWorker({ databaseUrl: h.app.db.url, probeLog, workspace: h.workspace });
      probeWorkers.push(second);
      await second.ready;
      const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 20_000);
      expect(run.steps.map((s) => s.status)).toEqual(["failed", "failed", "failed"]);
      const [notStarted, started, unmarked] = run.steps;
      expect(notStarted!.reason).toContain("its command had not started; safe to retry");
      expect(started!.reason).toContain("its command may have run; check before retrying");
      expect(unmarked!.reason).toContain("its command may have run; check before retrying");
      const events = await readEvents(h.app.db.pool, runId, 0);
      expect(
        Object.fromEntries(
          events.filter((e) => e.type === "step.interrupted").map((e) => [e.stepId, e.data.effectsStarted]),
        ),
      ).toEqual({ step_1: false, step_2: true, step_3: true });
      // Nothing ran again on its own, and the step that had not started never ran at all.
      expect((await readProbeLog(probeLog)).map((e) => e.stepId).sort()).toEqual(["step_2", "step_3"]);
      expect(sequenceProblems(events)).toEqual([]);
      expect(illegalTransitions(events)).toEqual([]);
    }, 600_000);
  });
  describe("a worker frozen inside a run transaction", () => {
    /** The process state letter from /proc (T: stopped). */
    const processState = async (pid: number) => (await fs.readFile(`/proc/${pid}/stat`, "utf8")).split(") ")[1]![0];
    const interruptedSteps = async (h: Harness, runId: string) =>
      (await readEvents(h.app.db.pool, runId, 0)).filter((e) => e.type === "step.interrupted").map((e) => e.stepId);

    /** R1's first outcome freezes worker A holding R1's lock; R2's step was running on A too. */
    async function freezeAWorker(h: Harness, idleInTransactionMs: number) {
      const probeLog = path.join(h.workspace, "probe.log");
      // R1's first step ends (and A freezes recording it) only once R2's step runs on A too.
      const release = path.join(h.workspace, "release-frozen");
      const frozenRun = await createRun(h, "frozen", [
        { id: "step_1", tool: "probe", args: { sleepMs: 300_000, releaseFile: release } },
        { id: "step_2", tool: "probe", args: {}, dependsOn: ["step_1"] },
      ]);
      const a = spawnProbeWorker({
        databaseUrl: h.app.db.url,
        probeLog,
        workspace: h.workspace,
        freezeRun: frozenRun,
        idleInTransactionMs,
      });
      probeWorkers.push(a);
      await a.ready;
      // Its first attempt outlasts the test (A is frozen); the peer's retry ends at once.
      const otherRun = await createRun(h, "other", [
        { id: "step_1", tool: "probe", args: { sleepMs: 300_000, retrySleepMs: 0 } },
      ]);
      await expect
        .poll(async () => (await h.caller.runs.get({ runId: otherRun })).steps[0]!.status, { timeout: 60_000 })
        .toBe("running");
      await fs.writeFile(release, "");
      await expect.poll(() => a.output(), { timeout: 15_000 }).toContain(`frozen ${frozenRun}`);
      // It prints, then stops itself: the stop lands a moment after the line.
      await expect.poll(() => processState(a.pid), { timeout: 5_000 }).toBe("T");
      expect((await h.caller.runs.get({ runId: otherRun })).steps[0]!.status).toBe("running");
      // Its peer: recovery and new work must go on around the frozen transaction.
      const b = spawnProbeWorker({ databaseUrl: h.app.db.url, probeLog, workspace: h.workspace });
      probeWorkers.push(b);
      await b.ready;
      return { a, b, frozenRun, otherRun };
    }

    it("recovery passes over the run a frozen worker holds: its other runs are recovered and new runs complete", async () => {
      harness = await startHarness({ worker: false, tools: createProbeRegistry() });
      const h = harness;
      // The server will not end the frozen session during this test.
      const { a, frozenRun, otherRun } = await freezeAWorker(h, 600_000);
      const fresh = await createRun(h, "after the freeze", [{ id: "step_1", tool: "probe", args: {} }]);
      expect((await h.waitForRun(otherRun, ["completed", "failed", "cancelled"], 20_000)).status).toBe("completed");
      expect(await interruptedSteps(h, otherRun)).toEqual(["step_1"]);
      expect((await h.waitForRun(fresh, ["completed", "failed", "cancelled"], 20_000)).status).toBe("completed");
      // All the while the frozen worker held its transaction, and its run waited.
      expect(await processState(a.pid)).toBe("T");
      const idle = await h.app.db.pool.query<{ pid: number }>(
        `select pid from pg_stat_activity where datname = current_database() and state = 'idle in transaction'`,
      );
      expect(idle.rowCount).toBeGreaterThan(0);
      expect((await h.caller.runs.get({ runId: frozenRun })).status).toBe("running");
      // What the server's idle-in-transaction timeout does; then the frozen run is recovered too.
      await h.app.db.pool.query("select pg_terminate_backend(pid) from unnest($1::int[]) as pid", [
        idle.rows.map((row) => row.pid),
      ]);
      expect((await h.waitForRun(frozenRun, ["completed", "failed", "cancelled"], 20_000)).status).toBe("completed");
      expect(await interruptedSteps(h, frozenRun)).toEqual(["step_1"]);
      a.child.kill("SIGCONT");
      for (const runId of [frozenRun, otherRun, fresh]) {
        const events = await readEvents(h.app.db.pool, runId, 0);
        expect(sequenceProblems(events)).toEqual([]);
        expect(illegalTransitions(events)).toEqual([]);
      }
    }, 600_000);

    it("the server ends a frozen worker's transaction after STEPWISE_IDLE_IN_TRANSACTION_MS, and its run is recovered", async () => {
      harness = await startHarness({ worker: false, tools: createProbeRegistry() });
      const h = harness;
      const { a, frozenRun } = await freezeAWorker(h, 2_000);
      expect((await h.waitForRun(frozenRun, ["completed", "failed", "cancelled"], 30_000)).status).toBe("completed");
      expect(await interruptedSteps(h, frozenRun)).toEqual(["step_1"]);
      // Recovered while the worker was still frozen, not because it woke up.
      expect(await processState(a.pid)).toBe("T");
      a.child.kill("SIGCONT");
      // Woken, it finds its transaction gone and carries on without undoing anything.
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      expect(a.child.exitCode).toBe(null);
      const run = await h.caller.runs.get({ runId: frozenRun });
      expect(run.status).toBe("completed");
      const events = await readEvents(h.app.db.pool, frozenRun, 0);
      expect(sequenceProblems(events)).toEqual([]);
      expect(illegalTransitions(events)).toEqual([]);
    }, 600_000);

    it("an engine transaction waiting for a run's lock gives up after lock_timeout and tries again", async () => {
      harness = await startHarness({ worker: false });
      const h = harness;
      const runId = await createRun(h, "locked", [
        { id: "step_1", tool: "echo", args: { value: 1 }, approvalRequired: true },
      ]);
      const holder = new pg.Client({ connectionString: h.app.db.url });
      await holder.connect();
      try {
        await holder.query("begin");
        await holder.query("select 1 from runs where id = $1 for update", [runId]);
        const pausing = h.caller.runs.pause({ runId });
        // The waiting engine transaction rolls back and begins anew: its start time changes.
        const starts = new Set<string>();
        await expect
          .poll(
            async () => {
              const waiting = await h.app.db.pool.query<{ xact_start: Date }>(
                `select xact_start from pg_stat_activity
                 where datname = current_database() and application_name = 'stepwise' and wait_event_type = 'Lock'`,
              );
              for (const row of waiting.rows) starts.add(row.xact_start.toISOString());
              return starts.size;
            },
            { timeout: 15_000, interval: 100 },
          )
          .toBeGreaterThanOrEqual(2);
        await holder.query("commit");
        await pausing;
        expect((await h.caller.runs.get({ runId })).status).toBe("paused");
      } finally {
        await holder.end();
      }
    });
  });
  describe("a network cut between a worker and the database", () => {
    it("the worker rides out a 4 s cut: it stays alive, every outcome is written after the cut, nothing runs twice", async () => {
      const { h, proxy, probeLog, worker } = await probeWorkerThroughProxy();
      const probeChain = (length: number, sleepMs: number) =>
        Array.from({ length }, (_, i) => ({
          id: `step_${i + 1}`,
          tool: "probe",
          args: { sleepMs },
          dependsOn: i ? [`step_${i}`] : [],
        }));
      const runs = await Promise.all([
        createRun(h, "chain one", probeChain(20, 100)),
        createRun(h, "chain two", probeChain(20, 150)),
        createRun(
          h,
          "fan",
          Array.from({ length: 20 }, (_, i) => ({ id: `step_${i + 1}`, tool: "probe", args: { sleepMs: 300 * i } })),
        ),
        // Spans the cut: its outcome can only be written after it.
        createRun(h, "long", [{ id: "step_1", tool: "probe", args: { sleepMs: 3_000 } }]),
      ]);
      const runningSteps = async () =>
        (
          await h.app.db.pool.query<{ run_id: string; step_id: string }>(
            "select run_id, step_id from run_steps where status = 'running'",
          )
        ).rows.map((row) => `${row.run_id}/${row.step_id}`);
      await expect.poll(async () => (await runningSteps()).length, { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
      await new Promise((resolve) => setTimeout(resolve, 500));
      const cutAt = await runningSteps();
      const cutStart = (await h.app.db.pool.query<{ now: Date }>("select clock_timestamp() as now")).rows[0]!.now;
      await proxy.cut(4_000);
      const cutEnd = (await h.app.db.pool.query<{ now: Date }>("select now()")).rows[0]!.now;
      expect(proxy.dropped()).toBeGreaterThan(0);

      for (const runId of runs) {
        expect((await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000)).status).toBe("completed");
      }
      expect(worker.child.exitCode).toBe(null);
      expect(worker.child.signalCode).toBe(null);
      const finished = await h.app.db.pool.query<{ id: string; status: string; attempt: number; finished_at: Date }>(
        "select run_id || '/' || step_id as id, status, attempt, finished_at from run_steps",
      );
      const byId = new Map(finished.rows.map((row) => [row.id, row]));
      expect(finished.rows.filter((row) => row.status !== "completed")).toEqual([]);
      // Steps seen running just before the cut finished their only attempt. One may have finished
      // in the moment between that look and the cut (its outcome's transaction began before the
      // connections dropped, so its finished_at, the transaction's start, is before the cut): it did
      // not span the cut. Every step that did had its outcome written after it.
      for (const id of cutAt) expect(byId.get(id)).toMatchObject({ status: "completed", attempt: 1 });
      const spanned = cutAt.filter((id) => byId.get(id)!.finished_at.getTime() >= cutStart.getTime());
      expect(spanned.length).toBeGreaterThan(0);
      for (const id of spanned) {
        expect(byId.get(id)!.finished_at.getTime()).toBeGreaterThanOrEqual(cutEnd.getTime() - 1_000);
      }
      await expectEachStepRanOnce(h, probeLog, runs, 61);
    }, 600_000);
  });
  describe("a commit whose answer the network loses", () => {
    it("the work it committed stands: a claim is still run, once; an outcome is not written twice; every run completes", async () => {
      const { h, proxy, probeLog, worker } = await probeWorkerThroughProxy();
      // Every other commit of the worker's from here on: claims, continuations, outcomes — and
      // whatever else it commits meanwhile (heartbeats, the queue's own work).
      proxy.loseCommitReplies([1, 3, 5, 7, 9, 11, 13, 15, 17, 19]);
      const probes = (count: number, sleepMs: (i: number) => number, chained: boolean) =>
        Array.from({ length: count }, (_, i) => ({
          id: `step_${i + 1}`,
          tool: "probe",
          args: { sleepMs: sleepMs(i) },
          dependsOn: chained && i ? [`step_${i}`] : [],
        }));
      const runs = await Promise.all([
        createRun(
          h,
          "chain",
          probes(8, () => 50, true),
        ),
        createRun(
          h,
          "fan",
          probes(8, (i) => 50 * i, false),
        ),
      ]);
      for (const runId of runs) {
        expect((await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000)).status).toBe("completed");
      }
      expect(proxy.lostReplies()).toBeGreaterThanOrEqual(5);
      expect(worker.child.exitCode).toBe(null);
      await expectEachStepRanOnce(h, probeLog, runs, 16);
    }, 120_000);

    it("an approval whose commit's answer is lost starts its run once, and the first steps it claimed run", async () => {
      harness = await startHarness({ worker: false, tools: createProbeRegistry() });
      const h = harness;
      proxy = await startProxyToDatabase(h.app.db.url);
      const probeLog = path.join(h.workspace, "probe.log");
      // A process that approves and runs steps: the run's first steps are claimed in the approval's
      // own transaction, to be started by this process once it commits.
      const app = await createAppContext({
        databaseUrl: throughProxy(h.app.db.url, proxy),
        workspaceRoot: h.workspace,
        worker: { concurrency: 4 },
        tools: createProbeRegistry({ logFile: probeLog }),
      });
      try {
        const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
        const plan = await caller.plans.createFromJson({
          planJson: JSON.stringify({
            goal: "approved as the network drops",
            steps: [1, 2, 3].map((n) => ({ id: `step_${n}`, tool: "probe", args: { sleepMs: 50 } })),
          }),
        });
        proxy.loseCommitReplyOf(/insert into runs/i);
        const { runId } = await caller.plans.approve({ planId: plan.id, version: plan.version });
        expect(proxy.lostReplies()).toBe(1);
        expect((await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000)).status).toBe("completed");
        const runs = await h.app.db.pool.query("select id from runs where plan_id = $1", [plan.id]);
        expect(runs.rows.map((row: { id: string }) => row.id)).toEqual([runId]);
        const executions = (await readProbeLog(probeLog)).map((e) => `${e.runId}/${e.stepId}`).sort();
        expect(executions).toEqual([1, 2, 3].map((n) => `${runId}/step_${n}`));
      } finally {
        await app.close();
      }
    }, 120_000);

    it("a queue job locked by a live worker that never heard it was: the job is freed and its step runs, once", async () => {
      const { h, proxy, probeLog, worker } = await probeWorkerThroughProxy();
      // The queue's next hand-out of a job: the job is locked to the worker's runner, the answer lost.
      proxy.loseRowsReplyOf(/get_job/);
      const runId = await createRun(h, "a job nobody runs", [{ id: "step_1", tool: "probe", args: { sleepMs: 50 } }]);
      expect((await h.waitForRun(runId, ["completed", "failed", "cancelled"], 90_000)).status).toBe("completed");
      expect(proxy.lostReplies()).toBe(1);
      expect(worker.child.exitCode).toBe(null);
      const executions = (await readProbeLog(probeLog)).map((e) => `${e.runId}/${e.stepId}`);
      expect(executions).toEqual([`${runId}/step_1`]);
    }, 150_000);

    it("any other job (a sub-plan's start) locked by a live worker that never heard it was is freed and runs", async () => {
      const { h, proxy, probeLog, worker } = await probeWorkerThroughProxy();
      const child = await h.caller.plans.createFromJson({
        planJson: JSON.stringify({
          goal: "the child",
          steps: [{ id: "step_1", tool: "probe", args: { sleepMs: 10 } }],
        }),
      });
      const runId = await createRun(h, "a sub-plan whose start is lost", [
        { id: "step_1", tool: "run_plan", args: { plan_id: child.id, version: child.version } },
      ]);
      await h.waitForStep(runId, "step_1", "awaiting_approval");
      // The queue's hand-out of the job that starts the child run: locked to the worker, the answer lost.
      proxy.loseRowsReplyOf(/get_job/, /start_child_run/);
      await h.caller.runs.decide({ runId, stepId: "step_1", approve: true });
      expect((await h.waitForRun(runId, ["completed", "failed", "cancelled"], 90_000)).status).toBe("completed");
      expect(proxy.lostReplies()).toBe(1);
      expect(worker.child.exitCode).toBe(null);
      const children = await h.app.db.pool.query("select id from runs where parent_run_id = $1", [runId]);
      expect(children.rowCount).toBe(1);
      expect((await readProbeLog(probeLog)).map((e) => e.runId)).toEqual([children.rows[0].id]);
    }, 150_000);
  });
  describe("per-attempt leases", () => {
    it("a live worker whose lease renewals stall keeps its step: its heartbeat says it is alive", async () => {
      harness = await startHarness({ worker: false, tools: createProbeRegistry() });
      const h = harness;
      const probeLog = path.join(h.workspace, "probe.log");
      // Beats on its own connection, but never renews the lease of what it runs.
      const holder = spawnProbeWorker({
        databaseUrl: h.app.db.url,
        probeLog,
        workspace: h.workspace,
        heartbeatMs: 200,
        skipLeaseRenewal: true,
      });
      probeWorkers.push(holder);
      await holder.ready;
      // The step runs until the test has seen the peer sweep past it (the release file), at most 5 min.
      const release = path.join(h.workspace, "release");
      const runId = await createRun(h, "lease", [
        { id: "step_1", tool: "probe_once", args: { sleepMs: 300_000, releaseFile: release } },
      ]);
      await expect
        .poll(async () => (await readProbeLog(probeLog)).map((e) => e.pid), { timeout: 15_000 })
        .toEqual([holder.pid]);
      // Its lease (five beats: 1 s) runs out while the step runs.
      await expect
        .poll(
          async () =>
            (
              await h.app.db.pool.query<{ lapsed: boolean }>(
                "select status = 'running' and lease_expires_at < now() - interval '1 second' as lapsed from run_steps where run_id = $1",
                [runId],
              )
            ).rows[0]!.lapsed,
          { timeout: 15_000, interval: 100 },
        )
        .toBe(true);
      // A peer joins and sweeps every 200 ms for the rest of the step.
      const peer = spawnProbeWorker({ databaseUrl: h.app.db.url, probeLog, workspace: h.workspace, heartbeatMs: 200 });
      probeWorkers.push(peer);
      await peer.ready;
      const sweeping = await h.app.db.pool.query<{ status: string; lapsed: boolean }>(
        "select status, lease_expires_at < now() as lapsed from run_steps where run_id = $1",
        [runId],
      );
      expect(sweeping.rows[0]).toEqual({ status: "running", lapsed: true });
      // The peer sweeps on each of its beats: fifteen of them (3 s) pass the lapsed lease over.
      await expect
        .poll(
          async () =>
            (
              await h.app.db.pool.query<{ swept: boolean }>(
                "select last_seen > started_at + interval '3 seconds' as swept from workers where pid = $1",
                [peer.pid],
              )
            ).rows[0]?.swept,
          { timeout: 60_000, interval: 100 },
        )
        .toBe(true);
      await fs.writeFile(release, "");
      const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
      expect(run.steps[0]).toMatchObject({ status: "completed", attempt: 1 });
      expect(run.steps[0]!.result).toMatchObject({ ok: true, value: { pid: holder.pid } });
      expect(await readProbeLog(probeLog)).toHaveLength(1);
      const events = await readEvents(h.app.db.pool, runId, 0);
      expect(events.filter((e) => e.type === "step.interrupted")).toEqual([]);
      expect(sequenceProblems(events)).toEqual([]);
      expect(illegalTransitions(events)).toEqual([]);
    }, 600_000);

    it("a cut shorter than the lease costs a worker none of its steps, though a peer watches", async () => {
      // Leases of 5 s (five beats of 1 s); the cut lasts 2 s.
      const { h, proxy, probeLog, worker: cutOff } = await probeWorkerThroughProxy({ heartbeatMs: 1_000 });
      // The steps run until the test has seen the leases renewed after the cut (the release file),
      // however long the peer takes to start; at most 5 min.
      const release = path.join(h.workspace, "release");
      const runId = await createRun(
        h,
        "short cut",
        Array.from({ length: 4 }, (_, i) => ({
          id: `step_${i + 1}`,
          tool: "probe_once",
          args: { sleepMs: 300_000, releaseFile: release },
        })),
      );
      await expect.poll(async () => (await readProbeLog(probeLog)).length, { timeout: 15_000 }).toBe(4);
      // The peer starts only now, so every step is the cut-off worker's.
      const peer = spawnProbeWorker({ databaseUrl: h.app.db.url, probeLog, workspace: h.workspace, heartbeatMs: 200 });
      probeWorkers.push(peer);
      await peer.ready;
      expect((await h.caller.runs.get({ runId })).steps.map((s) => s.status)).toEqual(Array(4).fill("running"));
      await proxy.cut(2_000);
      const cutEnd = (await h.app.db.pool.query<{ now: Date }>("select now()")).rows[0]!.now;
      // Every lease renewed after the cut (a lease is five beats: 5 s), while the peer swept every
      // 200 ms: had one lapsed in between, the peer would have taken its step by now.
      await expect
        .poll(
          async () =>
            (
              await h.app.db.pool.query<{ renewed: string }>(
                "select count(*) as renewed from run_steps where run_id = $1 and status = 'running' and lease_expires_at > $2::timestamptz + interval '4 seconds'",
                [runId, cutEnd],
              )
            ).rows[0]!.renewed,
          { timeout: 60_000, interval: 100 },
        )
        .toBe("4");
      await fs.writeFile(release, "");
      const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 90_000);
      const events = await readEvents(h.app.db.pool, runId, 0);
      expect(events.filter((e) => e.type === "step.interrupted").map((e) => e.stepId)).toEqual([]);
      expect(run.status).toBe("completed");
      expect(run.steps.map((s) => s.attempt)).toEqual([1, 1, 1, 1]);
      expect((await readProbeLog(probeLog)).map((e) => e.pid)).toEqual([
        cutOff.pid,
        cutOff.pid,
        cutOff.pid,
        cutOff.pid,
      ]);
      expect(cutOff.child.exitCode).toBe(null);
      expect(sequenceProblems(events)).toEqual([]);
      expect(illegalTransitions(events)).toEqual([]);
    }, 600_000);
  });
});
