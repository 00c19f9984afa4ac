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

let harness: Harness | undefined;
const probeWorkers: ProbeWorkerProcess[] = [];
afterEach(async () => {
  await Promise.all(probeWorkers.splice(0).map((worker) => worker.stop()));
  await harness?.close();
  harness = undefined;
});

const FAN_OUT = 198;

describe("work distribution across worker processes", () => {
  it("two worker processes share one run of 200 steps: each step executes exactly once", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const probeLog = path.join(harness.workspace, "probe.log");
    const leaves = Array.from({ length: FAN_OUT }, (_, i) => `step_${i + 2}`);
    const steps = [
      { id: "step_1", description: "root", tool: "probe", args: { value: "root" } },
      // A short sleep keeps jobs in flight long enough that one process cannot absorb them all.
      ...leaves.map((id) => ({
        id,
        description: `leaf ${id}`,
        tool: "probe",
        args: { sleepMs: 20, value: "$step_1" },
        dependsOn: ["step_1"],
      })),
      { id: "step_200", description: "join", tool: "probe", args: { value: "$step_1" }, dependsOn: leaves },
    ];
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({ goal: "fan out", steps }),
    });
    const workers = [0, 1].map(() =>
      spawnProbeWorker({ databaseUrl: harness!.app.db.url, probeLog, workspace: harness!.workspace, concurrency: 4 }),
    );
    probeWorkers.push(...workers);
    await Promise.all(workers.map((worker) => worker.ready));
    const registered = await harness.app.db.pool.query<{ pid: number }>("select pid from workers order by pid");
    expect(registered.rows.map((row) => row.pid)).toEqual(workers.map((worker) => worker.pid).sort((a, b) => a - b));

    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1, maxParallel: 32 });
    const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 90_000);
    expect(run.status).toBe("completed");
    expect(run.steps).toHaveLength(200);
    expect(run.steps.every((step) => step.status === "completed" && step.attempt === 1)).toBe(true);

    // Exactly once, as seen from outside the database.
    const executions = await readProbeLog(probeLog);
    expect(executions).toHaveLength(200);
    const byStep = executionsByStep(executions);
    expect([...byStep.keys()].sort()).toEqual(run.steps.map((step) => step.stepId).sort());
    for (const step of run.steps) {
      const [execution] = byStep.get(step.stepId)!;
      expect(byStep.get(step.stepId), step.stepId).toHaveLength(1);
      expect(execution!.attempt).toBe(1);
      // The recorded result comes from the process that executed the step, and the step names it.
      expect(step.result?.value).toMatchObject({ stepId: step.stepId, attempt: 1, pid: execution!.pid });
      expect(step.worker, step.stepId).toMatch(new RegExp(` · pid ${execution!.pid}$`));
    }

    // Both processes did real work.
    const perProcess = new Map(workers.map((worker) => [worker.pid, 0]));
    for (const execution of executions) perProcess.set(execution.pid, (perProcess.get(execution.pid) ?? 0) + 1);
    expect([...perProcess.keys()].sort()).toEqual(workers.map((worker) => worker.pid).sort());
    for (const [pid, count] of perProcess) expect(count, `steps executed by pid ${pid}`).toBeGreaterThan(0);

    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
    for (const type of ["step.running", "step.completed"]) {
      const counts = new Map<string, number>();
      for (const event of events.filter((e) => e.type === type)) {
        counts.set(event.stepId!, (counts.get(event.stepId!) ?? 0) + 1);
      }
      expect(counts.size, type).toBe(200);
      expect(
        [...counts.values()].every((count) => count === 1),
        `${type} once per step`,
      ).toBe(true);
    }
    expect(events.filter((e) => e.type === "run.completed")).toHaveLength(1);
    const running = events.find((e) => e.type === "step.running" && e.stepId === "step_200")!;
    expect(running.data).toMatchObject({ worker: run.steps.find((step) => step.stepId === "step_200")!.worker });

    // A stopped worker's row stays, marked: the steps it ran still name it.
    await Promise.all(probeWorkers.splice(0).map((worker) => worker.stop()));
    const rows = await harness.app.db.pool.query<{ pid: number; stopped: boolean }>(
      "select pid, stopped_at is not null as stopped from workers",
    );
    expect(rows.rows.map((row) => row.pid).sort()).toEqual(workers.map((worker) => worker.pid).sort());
    expect(rows.rows.every((row) => row.stopped)).toBe(true);
    const after = await harness.caller.runs.get({ runId });
    expect(after.steps.every((step) => step.worker !== null)).toBe(true);
  }, 600_000);

  it("when one of two worker processes is SIGKILLed mid-run, the survivor finishes the run", async () => {
    harness = await startHarness({ worker: false, tools: createProbeRegistry() });
    const probeLog = path.join(harness.workspace, "probe.log");
    const leaves = Array.from({ length: FAN_OUT }, (_, i) => `step_${i + 2}`);
    const steps = [
      { id: "step_1", description: "root", tool: "probe", args: { value: "root" } },
      ...leaves.map((id) => ({
        id,
        description: `leaf ${id}`,
        tool: "probe",
        args: { sleepMs: 20, value: "$step_1" },
        dependsOn: ["step_1"],
      })),
      { id: "step_200", description: "join", tool: "probe", args: { value: "$step_1" }, dependsOn: leaves },
    ];
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "fan out", steps }) });
    const [victim, survivor] = [0, 1].map(() =>
      spawnProbeWorker({ databaseUrl: harness!.app.db.url, probeLog, workspace: harness!.workspace, concurrency: 4 }),
    ) as [ProbeWorkerProcess, ProbeWorkerProcess];
    probeWorkers.push(victim, survivor);
    await Promise.all([victim.ready, survivor.ready]);
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1, maxParallel: 32 });
    // Kill one process once the run is well under way, at whatever point its steps have reached.
    await expect
      .poll(async () => (await readProbeLog(probeLog)).filter((e) => e.pid === victim.pid).length, {
        timeout: 60_000,
        interval: 20,
      })
      .toBeGreaterThan(30);
    await victim.kill();
    const atKill = new Map((await harness.caller.runs.get({ runId })).steps.map((s) => [s.stepId, s]));

    // The kill may land between graphile-worker handing the victim a job and the victim claiming
    // its step; durability.int.test.ts reproduces that case deterministically ("took off the queue").
    await expect
      .poll(async () => (await harness!.caller.runs.get({ runId })).status, {
        timeout: 120_000,
        message: "the survivor must finish the run, including steps whose jobs the killed worker had taken",
      })
      .toBe("completed");
    const run = await harness.caller.runs.get({ runId });
    const executions = executionsByStep(await readProbeLog(probeLog));
    for (const step of run.steps) {
      const ran = executions.get(step.stepId) ?? [];
      const wasRunning = atKill.get(step.stepId)!.status === "running";
      // Only a step interrupted by the kill may have run twice (once if it died before its tool started).
      if (wasRunning) expect([1, 2], step.stepId).toContain(ran.length);
      else expect(ran, step.stepId).toHaveLength(1);
      expect(ran.at(-1), step.stepId).toMatchObject({ attempt: step.attempt });
      if (wasRunning) expect(ran.at(-1)!.pid, step.stepId).toBe(survivor.pid);
    }
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
    for (const step of run.steps) {
      expect(events.filter((e) => e.type === "step.completed" && e.stepId === step.stepId)).toHaveLength(1);
    }
  }, 600_000);
});
