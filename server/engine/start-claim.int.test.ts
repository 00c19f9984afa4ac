import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startRun, type EngineDeps } from "./engine";
import type { StepJobRef } from "./run-transaction";
import { startStepWorker, type StepWorker } from "./worker";

/**
 * A run's first steps start in the process that approved it, when that process runs a worker,
 * without waiting for the queue to deliver their jobs (the queue still has them, as a fallback).
 */

let harness: Harness | undefined;
let worker: StepWorker | undefined;
afterEach(async () => {
  await worker?.stop({ graceMs: 1_000 });
  worker = undefined;
  await harness?.close();
  harness = undefined;
});

const plan = {
  goal: "two roots and a dependent",
  steps: [
    { id: "step_1", description: "one", tool: "echo", args: { value: 1 } },
    { id: "step_2", description: "two", tool: "echo", args: { value: 2 } },
    { id: "step_3", description: "three", tool: "echo", args: { value: 3 }, dependsOn: ["step_1", "step_2"] },
  ],
};

describe("starting a run", () => {
  it("hands its first queued steps to this process's worker once the run is committed", async () => {
    const h = (harness = await startHarness({ worker: false }));
    const created = await h.caller.plans.createFromJson({ planJson: JSON.stringify(plan) });
    const handed: { jobs: StepJobRef[]; visible: number }[] = [];
    const deps: EngineDeps = {
      ...h.app.engine,
      takeQueuedSteps: (jobs) => {
        // Seen from another connection at once: the run is committed before its steps are handed over.
        void h.app.db.pool
          .query("select count(*)::int as n from runs where id = $1", [jobs[0]!.runId])
          .then((result) => handed.push({ jobs, visible: result.rows[0]!.n }));
      },
    };
    const { runId } = await startRun(deps, {
      planId: created.id,
      version: created.version,
      actor: "tester",
      workspaceRoot: h.workspace,
    });
    await expect.poll(() => handed.length).toBe(1);
    expect(handed[0]!.visible).toBe(1);
    expect(handed[0]!.jobs).toEqual([
      { runId, stepId: "step_1", attempt: 1 },
      { runId, stepId: "step_2", attempt: 1 },
    ]);
  });

  it("a worker given queued steps runs them even when their queue jobs are gone", async () => {
    const h = (harness = await startHarness({ worker: false }));
    const created = await h.caller.plans.createFromJson({ planJson: JSON.stringify(plan) });
    const { runId } = await h.caller.plans.approve({ planId: created.id, version: created.version });
    // Nobody but the worker below may run them: the queue's jobs are removed.
    for (const stepId of ["step_1", "step_2"]) {
      await h.app.db.pool.query("select graphile_worker.remove_job($1)", [`${runId}:${stepId}:1`]);
    }
    // A minute between beats: no recovery sweep re-queues them during the test.
    worker = await startStepWorker(h.app.engine, { databaseUrl: h.app.db.url, concurrency: 4, heartbeatMs: 60_000 });
    worker.takeNow([
      { runId, stepId: "step_1", attempt: 1 },
      { runId, stepId: "step_2", attempt: 1 },
      // Already taken: a duplicate claims nothing and runs nothing.
      { runId, stepId: "step_1", attempt: 1 },
    ]);
    const run = await h.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.steps.map((step) => [step.stepId, step.attempt])).toEqual([
      ["step_1", 1],
      ["step_2", 1],
      ["step_3", 1],
    ]);
  });
});
