import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { createProbeRegistry, illegalTransitions, readProbeLog, sequenceProblems } from "../../tests/probe-tool";
import { readEvents } from "../events/store";

/**
 * Optimistic step transactions (prediction.ts): a chain this process runs goes one round trip per
 * step; a run changed behind its back, or a decision that needs a read, goes the usual way — and
 * every run still executes each step once, in order, with every event in sequence.
 */

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  delete process.env.STEPWISE_PROBE_LOG;
});

const chain = (length: number, args: (i: number) => Record<string, unknown>) =>
  Array.from({ length }, (_, i) => ({
    id: `step_${i + 1}`,
    tool: "probe",
    args: args(i + 1),
    ...(i > 0 && { dependsOn: [`step_${i}`] }),
  }));

async function runPlan(h: Harness, steps: unknown[]) {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "chain", steps }) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return runId;
}

async function expectOnceInOrder(h: Harness, runId: string, probeLog: string, steps: number) {
  const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
  expect(run.status).toBe("completed");
  const executions = (await readProbeLog(probeLog)).filter((e) => e.runId === runId);
  expect(executions.map((e) => e.stepId)).toEqual(Array.from({ length: steps }, (_, i) => `step_${i + 1}`));
  const events = await readEvents(h.app.db.pool, runId, 0);
  expect(sequenceProblems(events)).toEqual([]);
  expect(illegalTransitions(events)).toEqual([]);
  return run;
}

describe("optimistic step transactions", () => {
  it("a chain goes one round trip per step once the run's first transaction here has read it", async () => {
    harness = await startHarness({ tools: createProbeRegistry() });
    const h = harness;
    const probeLog = path.join(h.workspace, "probe.log");
    process.env.STEPWISE_PROBE_LOG = probeLog;
    const before = h.app.worker!.transactionCounts();
    await expectOnceInOrder(
      h,
      await runPlan(
        h,
        chain(12, () => ({})),
      ),
      probeLog,
      12,
    );
    const after = h.app.worker!.transactionCounts();
    // The first step's claim reads the run; every outcome after it is predicted, and right.
    expect(after.optimistic - before.optimistic).toBeGreaterThanOrEqual(11);
    expect(after.stale - before.stale).toBe(0);
  });

  it("a run changed by another process meanwhile is found stale under the lock and goes the usual way", async () => {
    harness = await startHarness({ tools: createProbeRegistry() });
    const h = harness;
    const probeLog = path.join(h.workspace, "probe.log");
    process.env.STEPWISE_PROBE_LOG = probeLog;
    const runId = await runPlan(
      h,
      chain(6, (i) => (i === 3 ? { sleepMs: 1_500 } : {})),
    );
    await expect
      .poll(async () => (await h.caller.runs.get({ runId })).steps[2]!.status, { timeout: 20_000 })
      .toBe("running");
    const before = h.app.worker!.transactionCounts();
    // What another process's transaction would leave: a run row this one did not write.
    await h.app.db.pool.query("update runs set max_parallel = max_parallel + 1 where id = $1", [runId]);
    const run = await expectOnceInOrder(h, runId, probeLog, 6);
    expect(run.steps.every((step) => step.attempt === 1)).toBe(true);
    const after = h.app.worker!.transactionCounts();
    expect(after.stale - before.stale).toBe(1);
    expect(after.usual - before.usual).toBeGreaterThanOrEqual(1);
  });

  it("a decision that needs a read of its own (a step's referenced output) goes the usual way", async () => {
    harness = await startHarness();
    const h = harness;
    const steps = [
      { id: "step_1", tool: "echo", args: { value: 1 } },
      { id: "step_2", tool: "echo", args: { value: 2 }, dependsOn: ["step_1"] },
      { id: "step_3", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
    ];
    const before = h.app.worker!.transactionCounts();
    const runId = await runPlan(h, steps);
    const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
    expect(run.status).toBe("completed");
    expect(run.steps[2]!.result?.value).toBe(2);
    const after = h.app.worker!.transactionCounts();
    expect(after.neededRead - before.neededRead).toBeGreaterThanOrEqual(1);
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(sequenceProblems(events)).toEqual([]);
  });
});
