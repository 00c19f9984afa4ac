import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import {
  createProbeRegistry,
  executionsByStep,
  illegalTransitions,
  readProbeLog,
  sequenceProblems,
} from "../../tests/probe-tool";
import { spawnProbeWorker, type ProbeWorkerProcess } from "../../tests/probe-worker";
import { readEvents } from "../events/store";
import type { RunStepView } from "./run-view";
import { startStepWorker } from "./worker";
import { programCommand } from "../../tests/program-command";

let harness: Harness | undefined;
let child: ChildProcess | undefined;
const probeWorkers: ProbeWorkerProcess[] = [];
afterEach(async () => {
  child?.kill("SIGKILL");
  child = undefined;
  await Promise.all(probeWorkers.splice(0).map((worker) => worker.kill()));
  await harness?.close();
  harness = undefined;
});

function startWorkerProcess(databaseUrl: string, workspace: string): ChildProcess {
  const [command, ...args] = programCommand("server/cli/main.ts", ["worker"]);
  return spawn(command!, args, {
    env: { ...process.env, DATABASE_URL: databaseUrl, STEPWISE_WORKSPACE: workspace, STEPWISE_HEARTBEAT_MS: "200" },
    stdio: "ignore",
  });
}

describe("durability", () => {
  it("an approval given while no worker runs takes effect when one starts", async () => {
    harness = await startHarness({ worker: false });
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "gated",
        steps: [{ id: "step_1", description: "write", tool: "write_file", args: { path: "x.txt", content: "x" } }],
      }),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    await expect
      .poll(async () => (await harness!.caller.runs.get({ runId })).steps[0]!.status)
      .toBe("awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    expect((await harness.caller.runs.get({ runId })).steps[0]!.status).toBe("ready");
    const worker = await startStepWorker(harness.app.engine, { databaseUrl: harness.app.db.url, concurrency: 2 });
    try {
      const run = await harness.waitForRun(runId);
      expect(run.status).toBe("completed");
    } finally {
      await worker.stop();
    }
  });

  it("after a worker process is SIGKILLed mid-run, another finishes the run without re-running completed steps", async () => {
    harness = await startHarness({ worker: false });
    const steps = [
      { id: "step_1", description: "quick", tool: "echo", args: { value: 1 } },
      ...Array.from({ length: 4 }, (_, i) => ({
        id: `step_${i + 2}`,
        description: "long",
        tool: "sleep",
        // Long enough that all four are seen running together, however unevenly a busy machine
        // starts them.
        args: { ms: 10_000 },
        dependsOn: ["step_1"],
      })),
      {
        id: "step_6",
        description: "join",
        tool: "echo",
        args: { value: "$step_1" },
        dependsOn: ["step_2", "step_3", "step_4", "step_5"],
      },
    ];
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "crash", steps }) });
    child = startWorkerProcess(harness.app.db.url, harness.workspace);
    // The process compiles the server as it starts (tens of seconds on a busy machine): the run
    // starts once it has registered, so the steps' own time is not spent waiting for it.
    const pid = child.pid;
    await expect
      .poll(
        async () =>
          (await harness!.app.db.pool.query("select 1 from workers where pid = $1 and stopped_at is null", [pid]))
            .rowCount,
        { timeout: 400_000, interval: 200 },
      )
      .toBe(1);
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    await expect
      .poll(
        async () => (await harness!.caller.runs.get({ runId })).steps.filter((s) => s.status === "running").length,
        { timeout: 30_000 },
      )
      .toBe(4);
    child.kill("SIGKILL");
    await new Promise((resolve) => child!.once("exit", resolve));
    child = undefined;

    const worker = await startStepWorker(harness.app.engine, {
      databaseUrl: harness.app.db.url,
      concurrency: 8,
      heartbeatMs: 200,
    });
    try {
      const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
      expect(run.status).toBe("completed");
      const byId = new Map(run.steps.map((s) => [s.stepId, s]));
      expect(byId.get("step_1")!.attempt).toBe(1);
      for (const id of ["step_2", "step_3", "step_4", "step_5"]) expect(byId.get(id)!.attempt).toBe(2);
      expect(byId.get("step_6")!.result?.value).toBe(1);

      const events = await readEvents(harness.app.db.pool, runId, 0);
      expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
      expect(events.filter((e) => e.type === "step.completed" && e.stepId === "step_1")).toHaveLength(1);
      expect(
        events
          .filter((e) => e.type === "step.interrupted")
          .map((e) => e.stepId)
          .sort(),
      ).toEqual(["step_2", "step_3", "step_4", "step_5"]);
    } finally {
      await worker.stop();
    }
  }, 600_000);

  it("a SIGKILLed probe worker: completed steps never run again, interrupted ones run again, events stay gap-free", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const probeLog = path.join(harness.workspace, "probe.log");
    const probe = (id: string, options: { sleepMs?: number; value?: unknown; dependsOn?: string[] } = {}) => ({
      id,
      description: `probe ${id}`,
      tool: "probe",
      args: { sleepMs: options.sleepMs ?? 10, ...(options.value !== undefined && { value: options.value }) },
      dependsOn: options.dependsOn ?? [],
    });
    const SLEEPER_MS = 3000;
    const steps = [
      probe("step_1", { value: "root" }),
      // Quick fan-out: these complete before the kill.
      ...[2, 3, 4, 5, 6].map((n) => probe(`step_${n}`, { value: "$step_1", dependsOn: ["step_1"] })),
      // Sleepers: several are mid-execution when the worker dies (how many depends on its concurrency).
      ...[7, 8, 9, 10, 11, 12].map((n) => probe(`step_${n}`, { sleepMs: SLEEPER_MS, dependsOn: ["step_1"] })),
      probe("step_13", { value: "$step_7", dependsOn: ["step_7", "step_8"] }),
      probe("step_14", { value: "$step_2", dependsOn: ["step_2", "step_3"] }),
      probe("step_15", { value: "$step_13", dependsOn: ["step_12", "step_13", "step_14"] }),
    ];
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "crash", steps }) });
    const first = spawnProbeWorker({ databaseUrl: harness.app.db.url, probeLog, workspace: harness.workspace });
    probeWorkers.push(first);
    await first.ready;
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1, maxParallel: 8 });

    // Kill only once the quick steps are done and only sleepers are running, at least two of them,
    // each with its probe line written, so the kill provably lands mid-execution.
    const sleepers = new Set(["step_7", "step_8", "step_9", "step_10", "step_11", "step_12"]);
    const stepsNow = async () => (await harness!.caller.runs.get({ runId })).steps;
    let observedRunning: string[] = [];
    await expect
      .poll(
        async () => {
          const current = await stepsNow();
          const executed = new Set((await readProbeLog(probeLog)).map((e) => `${e.stepId}#${e.attempt}`));
          const quickDone = current.slice(0, 6).every((s) => s.status === "completed");
          const running = current.filter((s) => s.status === "running");
          observedRunning = running.map((s) => s.stepId);
          return (
            quickDone &&
            running.length >= 2 &&
            running.every((s) => sleepers.has(s.stepId) && executed.has(`${s.stepId}#${s.attempt}`))
          );
        },
        { timeout: 30_000, interval: 50 },
      )
      .toBe(true);
    await first.kill();
    const atKill = new Map((await stepsNow()).map((s) => [s.stepId, s]));
    const interrupted = [...atKill.values()].filter((s) => s.status === "running").map((s) => s.stepId);
    const completedBeforeKill = [...atKill.values()].filter((s) => s.status === "completed");
    // Sleepers take seconds: what was running at the last look was still running at the kill.
    expect(interrupted).toEqual(expect.arrayContaining(observedRunning));
    expect(completedBeforeKill.length).toBeGreaterThanOrEqual(6);

    const second = spawnProbeWorker({ databaseUrl: harness.app.db.url, probeLog, workspace: harness.workspace });
    probeWorkers.push(second);
    await second.ready;
    const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
    expect(run.status).toBe("completed");
    expect(run.steps.every((s) => s.status === "completed")).toBe(true);

    const executions = executionsByStep(await readProbeLog(probeLog));
    const events = await readEvents(harness.app.db.pool, runId, 0);
    const final = new Map<string, RunStepView>(run.steps.map((s) => [s.stepId, s]));

    for (const step of completedBeforeKill) {
      // Executed exactly once, by the killed worker, and its recorded result was never rewritten.
      expect(executions.get(step.stepId), step.stepId).toEqual([
        { runId, stepId: step.stepId, attempt: step.attempt, pid: first.pid },
      ]);
      expect(final.get(step.stepId)!.attempt).toBe(step.attempt);
      expect(final.get(step.stepId)!.result).toEqual(step.result);
    }
    for (const stepId of interrupted) {
      // At least once: the interrupted attempt, then a higher attempt on the new worker.
      const killedAttempt = atKill.get(stepId)!.attempt;
      const finalAttempt = final.get(stepId)!.attempt;
      expect(finalAttempt, stepId).toBeGreaterThan(killedAttempt);
      const ran = executions.get(stepId)!;
      if (observedRunning.includes(stepId)) {
        expect(ran).toContainEqual({ runId, stepId, attempt: killedAttempt, pid: first.pid });
      }
      expect(ran).toContainEqual({ runId, stepId, attempt: finalAttempt, pid: second.pid });
      expect(events.filter((e) => e.type === "step.interrupted" && e.stepId === stepId)).toHaveLength(1);
    }
    for (const step of run.steps) {
      const ran = executions.get(step.stepId) ?? [];
      // No attempt of any step executed twice, and steps not interrupted executed exactly once.
      expect(new Set(ran.map((e) => e.attempt)).size, step.stepId).toBe(ran.length);
      if (!interrupted.includes(step.stepId)) expect(ran, step.stepId).toHaveLength(1);
      // One recorded result per step, from the attempt that finished.
      expect(events.filter((e) => e.type === "step.completed" && e.stepId === step.stepId)).toHaveLength(1);
      expect(step.result).toMatchObject({ ok: true, value: { stepId: step.stepId, attempt: step.attempt } });
    }
    expect(
      events
        .filter((e) => e.type === "step.interrupted")
        .map((e) => e.stepId!)
        .sort(),
    ).toEqual([...interrupted].sort());
    // A dependent of an interrupted step saw the output of the attempt that finished.
    expect(final.get("step_13")!.result?.value).toMatchObject({ value: final.get("step_7")!.result?.value });
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
  }, 600_000);

  it("an interrupted non-idempotent step fails as interrupted, blocks only its dependents, and runs again only when a person retries it", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const probeLog = path.join(harness.workspace, "probe.log");
    const steps = [
      { id: "step_1", description: "side effect", tool: "probe_once", args: { sleepMs: 3000, value: "once" } },
      { id: "step_2", description: "needs it", tool: "probe", args: { value: "$step_1" }, dependsOn: ["step_1"] },
      { id: "step_3", description: "independent", tool: "probe", args: { value: "free" } },
    ];
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "once", steps }) });
    const first = spawnProbeWorker({ databaseUrl: harness.app.db.url, probeLog, workspace: harness.workspace });
    probeWorkers.push(first);
    await first.ready;
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    const statusOf = async () =>
      Object.fromEntries((await harness!.caller.runs.get({ runId })).steps.map((s) => [s.stepId, s.status]));
    await expect
      .poll(
        async () => {
          const executed = (await readProbeLog(probeLog)).map((e) => e.stepId);
          return { ...(await statusOf()), step_1_executed: executed.includes("step_1") };
        },
        { timeout: 30_000, interval: 50 },
      )
      .toEqual({ step_1: "running", step_2: "pending", step_3: "completed", step_1_executed: true });
    await first.kill();

    const second = spawnProbeWorker({ databaseUrl: harness.app.db.url, probeLog, workspace: harness.workspace });
    probeWorkers.push(second);
    await second.ready;
    let run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 20_000);
    expect(run.status).toBe("failed");
    expect(run.steps.map((s) => s.status)).toEqual(["failed", "blocked", "completed"]);
    expect(run.steps[0]!.error).toMatch(/^Interrupted/);
    expect(run.steps[0]!.attempt).toBe(1);
    // The engine did not run it again on its own.
    expect((await readProbeLog(probeLog)).filter((e) => e.stepId === "step_1")).toEqual([
      { runId, stepId: "step_1", attempt: 1, pid: first.pid },
    ]);

    await harness.caller.runs.retryStep({ runId, stepId: "step_1" });
    run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 20_000);
    expect(run.status).toBe("completed");
    expect(run.steps[0]!.attempt).toBe(2);
    expect(run.steps[1]!.result?.value).toMatchObject({ value: { stepId: "step_1", attempt: 2, pid: second.pid } });
    const executions = executionsByStep(await readProbeLog(probeLog));
    expect(executions.get("step_1")!.map((e) => [e.attempt, e.pid])).toEqual([
      [1, first.pid],
      [2, second.pid],
    ]);
    expect(executions.get("step_3")).toHaveLength(1);
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.interrupted")).toMatchObject([
      { stepId: "step_1", data: { attempt: 1, idempotent: false } },
    ]);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
  });

  it("steps whose jobs a worker took off the queue but died before claiming still run", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const probeLog = path.join(harness.workspace, "probe.log");
    const steps = [1, 2].map((n) => ({ id: `step_${n}`, description: "quick", tool: "probe", args: { value: n } }));
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "stall", steps }) });
    // A worker stalled between taking a job and claiming its step (as while it waits for the run
    // lock), then killed: graphile-worker keeps a dead worker's job locked for four hours.
    const stalled = spawnProbeWorker({
      databaseUrl: harness.app.db.url,
      probeLog,
      workspace: harness.workspace,
      stallClaims: true,
    });
    probeWorkers.push(stalled);
    await stalled.ready;
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    const lockedJobs = async () =>
      (
        await harness!.app.db.pool.query<{ locked: number }>(
          "select count(*)::int as locked from graphile_worker.jobs where (task_identifier = 'run_step' or task_identifier like 'run_step@%') and locked_at is not null",
        )
      ).rows[0]!.locked;
    await expect.poll(lockedJobs, { timeout: 10_000 }).toBe(2);
    await stalled.kill();
    expect((await harness.caller.runs.get({ runId })).steps.map((s) => s.status)).toEqual(["ready", "ready"]);

    const worker = spawnProbeWorker({ databaseUrl: harness.app.db.url, probeLog, workspace: harness.workspace });
    probeWorkers.push(worker);
    await worker.ready;
    // Recovery looks after five missed heartbeats (1 s here); wait fifteen times that.
    await expect
      .poll(async () => (await harness!.caller.runs.get({ runId })).status, {
        timeout: 15_000,
        message: "a step whose job was taken by a worker that died before claiming it must run again",
      })
      .toBe("completed");
    const executions = await readProbeLog(probeLog);
    expect(executions.map((e) => e.stepId).sort()).toEqual(["step_1", "step_2"]);
    expect(sequenceProblems(await readEvents(harness.app.db.pool, runId, 0))).toEqual([]);
  });

  it("a live worker with a slower heartbeat than its peers is not treated as dead", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const probeLog = path.join(harness.workspace, "probe.log");
    const steps = [{ id: "step_1", description: "slow side effect", tool: "probe_once", args: { sleepMs: 3000 } }];
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "peers", steps }) });
    // Workers on different machines may be configured differently; STEPWISE_HEARTBEAT_MS is per process.
    const slow = spawnProbeWorker({
      databaseUrl: harness.app.db.url,
      probeLog,
      workspace: harness.workspace,
      heartbeatMs: 2000,
    });
    probeWorkers.push(slow);
    await slow.ready;
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    await expect.poll(async () => (await readProbeLog(probeLog)).length, { timeout: 10_000 }).toBe(1);
    const fast = spawnProbeWorker({
      databaseUrl: harness.app.db.url,
      probeLog,
      workspace: harness.workspace,
      heartbeatMs: 200,
    });
    probeWorkers.push(fast);
    await fast.ready;

    const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 20_000);
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(
      events
        .filter((e) => e.type === "step.interrupted")
        .map((e) => `${e.stepId} by a peer while its worker was alive`),
    ).toEqual([]);
    expect(run.status).toBe("completed");
    expect(run.steps[0]).toMatchObject({ status: "completed", attempt: 1 });
    expect(await readProbeLog(probeLog)).toEqual([{ runId, stepId: "step_1", attempt: 1, pid: slow.pid }]);
  });
});
