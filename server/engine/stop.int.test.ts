import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { createEngineDeps } from "./engine";
import { startStepWorker, type StepWorker } from "./worker";
import { processesIn } from "../../tests/processes-in";

/**
 * Stop means stop, through the engine: a cancelled or timed-out shell step runs nothing of its
 * script after the decision, a retry starts only once the old attempt is dead, and a worker's
 * gentle shutdown never fails a step it had to abort — the step is left to recovery and completes
 * under the next worker, as after a double Ctrl-C.
 */

let harness: Harness | undefined;
const workers: StepWorker[] = [];
afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ graceMs: 0 })));
  await harness?.close();
  harness = undefined;
});

async function createRun(h: Harness, steps: unknown[]): Promise<string> {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "stop", steps }) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return runId;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function approveWhenAsked(h: Harness, runId: string) {
  await expect
    .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 60_000 })
    .toBe("awaiting_approval");
  await h.caller.runs.decide({ runId, stepId: "step_1", approve: true });
}

describe("a shell step that is stopped", () => {
  it("cancelled after its first line: the next line never runs and no process of it remains", async () => {
    harness = await startHarness({ concurrency: 1 });
    const h = harness;
    const marker = path.join(h.workspace, "marker");
    const seen = path.join(h.workspace, "seen");
    const runId = await createRun(h, [
      { id: "step_1", tool: "shell", args: { command: "echo S > seen; sleep 20; echo A > marker" } },
    ]);
    await approveWhenAsked(h, runId);
    await expect.poll(() => fs.existsSync(seen), { timeout: 60_000, interval: 20 }).toBe(true);
    expect(processesIn(h.workspace).length).toBeGreaterThan(0);
    await h.caller.runs.cancel({ runId });
    await expect.poll(() => processesIn(h.workspace), { timeout: 15_000, interval: 20 }).toEqual([]);
    // Well beyond the 2 s the old SIGTERM grace gave the script's shell to go on.
    await sleep(4_000);
    expect(fs.existsSync(marker)).toBe(false);
    expect((await h.caller.runs.get({ runId })).status).toBe("cancelled");
  }, 180_000);

  it("timed out: the automatic retry starts only once the old attempt is dead, and its next line never runs", async () => {
    harness = await startHarness({ concurrency: 2 });
    const h = harness;
    // Each attempt holds a lock for as long as any of its processes lives (the lock file's
    // descriptor is inherited): an attempt that finds it taken ran beside the one before it.
    // The first attempt sleeps into its timeout; the retry finishes at once.
    const command = [
      "exec 9>>lock",
      "flock -n 9 || echo overlap >> overlap",
      "if [ -e first ]; then echo retry >> attempts; exit 0; fi",
      "touch first",
      "echo first >> attempts",
      "sleep 20",
      "echo after-timeout >> attempts",
    ].join("; ");
    const runId = await createRun(h, [
      { id: "step_1", tool: "shell", timeoutSeconds: 2, retry: { maxAttempts: 2, backoffMs: 0 }, args: { command } },
    ]);
    await approveWhenAsked(h, runId);
    const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 120_000);
    expect(run.status).toBe("completed");
    expect(run.steps[0]!.attempt).toBe(2);
    await sleep(3_000);
    expect(fs.readFileSync(path.join(h.workspace, "attempts"), "utf8").split("\n").filter(Boolean)).toEqual([
      "first",
      "retry",
    ]);
    expect(fs.existsSync(path.join(h.workspace, "overlap"))).toBe(false);
    expect(processesIn(h.workspace)).toEqual([]);
    // The timed-out attempt's end names the processes its stop killed.
    const retrying = (await readEvents(h.app.db.pool, runId, 0)).find((event) => event.type === "step.retrying");
    expect((retrying?.data as { error?: string }).error).toMatch(/^Timed out after 2s \(stopped: killed \d+ process/);
  }, 180_000);
});

describe("a gentle shutdown with a step still running", () => {
  it("never fails the step: workers in turn stop during a step, and each step completes under the next", async () => {
    // Five stops in a row here; the soak of 20 and more is `npm run bench:gentle-stops`, which sets
    // STEPWISE_GENTLE_STOPS (every round is checked the same way).
    const rounds = Math.max(5, Number(process.env.STEPWISE_GENTLE_STOPS) || 5);
    harness = await startHarness({ worker: false });
    const h = harness;
    const startWorker = () =>
      startStepWorker(createEngineDeps(h.app.db.pool, h.app.tools), {
        databaseUrl: h.app.db.url,
        concurrency: 1,
        heartbeatMs: 100,
      });
    let worker = await startWorker();
    workers.push(worker);
    for (let round = 1; round <= rounds; round++) {
      const runId = await createRun(h, [{ id: "step_1", tool: "sleep", args: { ms: 1_500 } }]);
      await expect
        .poll(async () => (await h.caller.runs.get({ runId })).steps[0]!.status, { timeout: 30_000, interval: 20 })
        .toBe("running");
      // A grace shorter than the step: the shutdown has to abort it.
      await worker.stop({ graceMs: 100 });
      const afterStop = await h.caller.runs.get({ runId });
      expect(afterStop.steps[0]!.status, `round ${round}`).not.toBe("failed");
      expect(afterStop.status, `round ${round}`).toBe("running");
      worker = await startWorker();
      workers.push(worker);
      const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
      expect(run.status, `round ${round}`).toBe("completed");
      expect(run.steps[0]!.status, `round ${round}`).toBe("completed");
    }
    console.info(`gentle stops in a row: ${rounds}`);
  }, 600_000);

  it("gives an approved shell step's attempt back: it runs again under the next worker, uncounted", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const startWorker = () =>
      startStepWorker(createEngineDeps(h.app.db.pool, h.app.tools), {
        databaseUrl: h.app.db.url,
        concurrency: 1,
        heartbeatMs: 100,
      });
    let worker = await startWorker();
    workers.push(worker);
    const marker = path.join(h.workspace, "runs");
    // Not idempotent, so recovery after a crash would ask a person: a gentle stop must not.
    const runId = await createRun(h, [
      { id: "step_1", tool: "shell", args: { command: `echo start >> runs; sleep 4; echo end >> runs` } },
    ]);
    await approveWhenAsked(h, runId);
    await expect.poll(() => fs.existsSync(marker), { timeout: 60_000, interval: 20 }).toBe(true);
    await worker.stop({ graceMs: 100 });
    const afterStop = await h.caller.runs.get({ runId });
    expect(afterStop.steps[0]!.status).not.toBe("failed");
    expect(afterStop.status).toBe("running");
    // Nothing of the first attempt ran after the stop.
    await sleep(4_500);
    expect(fs.readFileSync(marker, "utf8")).toBe("start\n");
    worker = await startWorker();
    workers.push(worker);
    const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
    expect(run.status).toBe("completed");
    expect(fs.readFileSync(marker, "utf8")).toBe("start\nstart\nend\n");
    const events = await readEvents(h.app.db.pool, runId, 0);
    const givenBack = events.find((event) => event.type === "step.retrying");
    expect(givenBack?.data).toMatchObject({ attempt: 1, interrupted: true });
    expect(events.some((event) => event.type === "step.interrupted")).toBe(false);
  }, 180_000);
});
