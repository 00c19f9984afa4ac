import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

async function createAndApprove(h: Harness, steps: unknown[], maxParallel?: number) {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "test", steps }) });
  return h.caller.plans.approve({ planId: plan.id, version: plan.version, ...(maxParallel && { maxParallel }) });
}

describe("run interventions and failure policy", () => {
  it("retrying a failed step re-runs it and releases the steps it blocked", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, [
      { id: "step_1", description: "read a file that appears later", tool: "read_file", args: { path: "later.txt" } },
      { id: "step_2", description: "uses it", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    ]);
    let run = await harness.waitForRun(runId);
    expect(run.steps.map((s) => s.status)).toEqual(["failed", "blocked"]);
    await import("node:fs/promises").then((fs) => fs.writeFile(`${harness!.workspace}/later.txt`, "now here"));
    await harness.caller.runs.retryStep({ runId, stepId: "step_1" });
    run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps.map((s) => s.status)).toEqual(["completed", "completed"]);
    expect(run.steps[0]!.attempt).toBe(2);
    expect(run.steps[1]!.result?.value).toBe("now here");
    await expect(harness.caller.runs.retryStep({ runId, stepId: "step_1" })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
    });
  });

  it("skipping a failed step runs dependents that do not need its output and skips those that do", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, [
      { id: "step_1", description: "fails", tool: "read_file", args: { path: "missing.txt" } },
      { id: "step_2", description: "needs output", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
      { id: "step_3", description: "only ordered after", tool: "echo", args: { value: 3 }, dependsOn: ["step_1"] },
    ]);
    await harness.waitForRun(runId);
    await harness.caller.runs.skipStep({ runId, stepId: "step_1" });
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps.map((s) => s.status)).toEqual(["skipped", "skipped", "completed"]);
  });

  it("a critical failure stops new work and fails the run; retryable timeouts are retried first", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(
      harness,
      [
        {
          id: "step_1",
          description: "times out",
          tool: "sleep",
          args: { ms: 5000 },
          timeoutSeconds: 1,
          critical: true,
          retry: { maxAttempts: 2, backoffMs: 10 },
        },
        {
          id: "step_2",
          description: "independent but later in order",
          tool: "echo",
          args: { value: 1 },
          dependsOn: ["step_3"],
        },
        // Outlasts step_1's two 1 s attempts by far, so it is still running at the critical
        // failure however slowly a busy machine handles the retry.
        { id: "step_3", description: "slow independent", tool: "sleep", args: { ms: 20_000 } },
      ],
      8,
    );
    const run = await harness.waitForRun(runId, ["failed"], 120_000);
    expect(run.steps[0]!.status).toBe("failed");
    expect(run.steps[0]!.attempt).toBe(2);
    expect(run.steps[0]!.result?.error).toMatch(/Timed out after 1s/);
    // step_3 was already running and finished; step_2 never started.
    expect(run.steps[2]!.status).toBe("completed");
    expect(run.steps[1]!.status).toBe("cancelled");
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.retrying" && e.stepId === "step_1")).toHaveLength(1);
  });

  it("respects the per-run parallelism limit", async () => {
    harness = await startHarness({ concurrency: 8 });
    const steps = Array.from({ length: 6 }, (_, i) => ({
      id: `step_${i + 1}`,
      description: "sleep",
      tool: "sleep",
      args: { ms: 200 },
    }));
    const { runId } = await createAndApprove(harness, steps, 2);
    await harness.waitForRun(runId, ["completed"]);
    const events = await readEvents(harness.app.db.pool, runId, 0);
    let running = 0;
    let peak = 0;
    for (const event of events) {
      if (event.type === "step.running") peak = Math.max(peak, ++running);
      if (event.type === "step.completed") running--;
    }
    expect(peak).toBe(2);
  });

  it("pause lets running steps finish and starts nothing new until resumed", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, [
      // Long enough to still be running when the pause lands, however slow the machine.
      { id: "step_1", description: "slow", tool: "sleep", args: { ms: 5_000 } },
      { id: "step_2", description: "after", tool: "echo", args: { value: 2 }, dependsOn: ["step_1"] },
    ]);
    await expect.poll(async () => (await harness!.caller.runs.get({ runId })).steps[0]!.status).toBe("running");
    await harness.caller.runs.pause({ runId });
    await expect.poll(async () => (await harness!.caller.runs.get({ runId })).steps[0]!.status).toBe("completed");
    await new Promise((resolve) => setTimeout(resolve, 300));
    let run = await harness.caller.runs.get({ runId });
    expect(run.status).toBe("paused");
    expect(run.steps[1]!.status).toBe("ready");
    await harness.caller.runs.resume({ runId });
    run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps[1]!.status).toBe("completed");
  });

  it("cancel aborts running steps and cancels the rest", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, [
      { id: "step_1", description: "long", tool: "sleep", args: { ms: 600_000 } },
      { id: "step_2", description: "after", tool: "echo", args: { value: 2 }, dependsOn: ["step_1"] },
    ]);
    await expect.poll(async () => (await harness!.caller.runs.get({ runId })).steps[0]!.status).toBe("running");
    await harness.caller.runs.cancel({ runId });
    const run = await harness.waitForRun(runId, ["cancelled"]);
    expect(run.steps.map((s) => s.status)).toEqual(["cancelled", "cancelled"]);
    // The sleeping tool was aborted rather than left to run out its 10 minutes: only then does
    // its entry go (the poll's backstop is far shorter than the sleep).
    await expect.poll(async () => harness!.app.engine.cancellations.size, { timeout: 60_000 }).toBe(0);
  });

  it("gates in parallel branches are decided independently, in any order", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, [
      { id: "step_1", description: "gate A", tool: "write_file", args: { path: "a.txt", content: "a" } },
      { id: "step_2", description: "gate B", tool: "write_file", args: { path: "b.txt", content: "b" } },
      { id: "step_3", description: "gate C", tool: "write_file", args: { path: "c.txt", content: "c" } },
      { id: "step_4", description: "after A", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
      { id: "step_5", description: "after B", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
    ]);
    const statusOf = async (id: string) =>
      (await harness!.caller.runs.get({ runId })).steps.find((s) => s.stepId === id)!.status;
    await expect.poll(() => statusOf("step_3")).toBe("awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    await expect.poll(() => statusOf("step_5")).toBe("completed");
    expect(await statusOf("step_1")).toBe("awaiting_approval");
    expect(await statusOf("step_3")).toBe("awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_3", approve: false });
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps.map((s) => s.status)).toEqual(["completed", "completed", "skipped", "completed", "completed"]);
    // Repeating a decision answers with the recorded one and records nothing; the contrary is refused.
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    await expect(harness.caller.runs.decide({ runId, stepId: "step_1", approve: false })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
    });
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { runId }, orderBy: { id: "asc" } });
    expect(audit.map((a) => `${a.action}:${a.stepId ?? ""}:${a.actor}`)).toEqual([
      "plan.approved::tester",
      "step.approved:step_2:tester",
      "step.denied:step_3:tester",
      "step.approved:step_1:tester",
    ]);
  });
});
