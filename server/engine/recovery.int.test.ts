import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

async function createAndApprove(steps: unknown[]) {
  const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "recover", steps }) });
  const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
  return { planId: plan.id, runId };
}

const statuses = (run: { steps: { stepId: string; status: string }[] }) =>
  Object.fromEntries(run.steps.map((s) => [s.stepId, s.status]));

describe("recovery actions on a failed step", () => {
  it("retry with new arguments stores a new plan version, moves the run to it and runs the step again", async () => {
    const { planId, runId } = await createAndApprove([
      { id: "step_1", description: "read", tool: "read_file", args: { path: "wrong.txt" } },
      { id: "step_2", description: "use", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    ]);
    await fs.writeFile(path.join(harness.workspace, "right.txt"), "found");
    expect(statuses(await harness.waitForRun(runId))).toEqual({ step_1: "failed", step_2: "blocked" });
    const applied = await harness.caller.runs.applyRecovery({
      runId,
      stepId: "step_1",
      action: { kind: "retry", args: { path: "right.txt" } },
    });
    expect(applied.planVersion).toBe(2);
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(run.planVersion).toBe(2);
    expect(run.steps.find((s) => s.stepId === "step_2")!.result?.value).toBe("found");
    const { plan } = await harness.caller.plans.get({ planId });
    expect(plan.version).toBe(2);
    expect(plan.steps[0]!.args).toEqual({ path: "right.txt" });
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { runId, action: "step.recovered" } });
    expect(audit[0]).toMatchObject({ actor: "tester", stepId: "step_1", detail: { action: "retry", planVersion: 2 } });
  });

  it("new arguments that break the plan are refused and change nothing", async () => {
    const { planId, runId } = await createAndApprove([
      { id: "step_1", description: "read", tool: "read_file", args: { path: "missing.txt" } },
    ]);
    await harness.waitForRun(runId);
    await expect(
      harness.caller.runs.applyRecovery({ runId, stepId: "step_1", action: { kind: "retry", args: { path: 42 } } }),
    ).rejects.toMatchObject({ code: "UNPROCESSABLE_CONTENT" });
    expect((await harness.caller.plans.get({ planId })).plan.version).toBe(1);
    expect((await harness.caller.runs.get({ runId })).steps[0]!.status).toBe("failed");
  });

  it("insert steps: new steps run first with fresh ids, then the failed step again; completed steps never rerun", async () => {
    const { planId, runId } = await createAndApprove([
      { id: "step_1", description: "prepare", tool: "echo", args: { value: "ready" } },
      {
        id: "step_2",
        description: "read a file nobody wrote",
        tool: "read_file",
        args: { path: "made.txt" },
        dependsOn: ["step_1"],
      },
      { id: "step_3", description: "after", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
    ]);
    await harness.waitForRun(runId);
    await harness.caller.runs.applyRecovery({
      runId,
      stepId: "step_2",
      action: {
        kind: "insert_steps",
        steps: [
          {
            id: "write",
            description: "write it",
            tool: "write_file",
            args: { path: "made.txt", content: "made" },
            approvalRequired: false,
          },
        ],
      },
    });
    // Gates only go up: the inserted write is gated whatever the action said, and waits for a person.
    await expect
      .poll(async () => (await harness.caller.runs.get({ runId })).steps.find((s) => s.stepId === "step_4")?.status)
      .toBe("awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_4", approve: true });
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(statuses(run)).toEqual({
      step_1: "completed",
      step_4: "completed",
      step_2: "completed",
      step_3: "completed",
    });
    expect(run.steps.map((s) => s.stepId)).toEqual(["step_1", "step_4", "step_2", "step_3"]);
    expect(run.steps.find((s) => s.stepId === "step_3")!.result?.value).toBe("made");
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.running" && e.stepId === "step_1")).toHaveLength(1);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const { plan } = await harness.caller.plans.get({ planId });
    expect(plan.steps.find((s) => s.id === "step_2")!.dependsOn).toEqual(["step_1", "step_4"]);
  });

  it("skip and abort act like the interventions; recovery of a step that did not fail is refused", async () => {
    const { runId } = await createAndApprove([
      { id: "step_1", description: "fails", tool: "read_file", args: { path: "nope.txt" } },
      // Still running when the run is aborted, however long the steps before take on a busy machine.
      { id: "step_2", description: "independent", tool: "sleep", args: { ms: 120_000 } },
    ]);
    const deadline = Date.now() + 60_000;
    while ((await harness.caller.runs.get({ runId })).steps[0]!.status !== "failed") {
      if (Date.now() > deadline) throw new Error("step_1 never failed");
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await expect(
      harness.caller.runs.applyRecovery({ runId, stepId: "step_2", action: { kind: "skip" } }),
    ).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
    await harness.caller.runs.applyRecovery({ runId, stepId: "step_1", action: { kind: "skip" } });
    expect((await harness.caller.runs.get({ runId })).steps[0]!.status).toBe("skipped");
    await harness.caller.runs.applyRecovery({ runId, stepId: "step_1", action: { kind: "abort" } });
    const run = await harness.waitForRun(runId, ["cancelled"]);
    expect(statuses(run)).toEqual({ step_1: "skipped", step_2: "cancelled" });
  });
});

describe("re-run from a step", () => {
  it("re-runs the chosen step and its dependents with edited arguments, reusing every other result", async () => {
    const { planId, runId } = await createAndApprove([
      { id: "step_1", description: "costly", tool: "echo", args: { value: "expensive" } },
      { id: "step_2", description: "independent", tool: "echo", args: { value: "side" } },
      { id: "step_3", description: "chosen", tool: "echo", args: { value: "old" }, dependsOn: ["step_1"] },
      { id: "step_4", description: "dependent", tool: "echo", args: { value: "$step_3" }, dependsOn: ["step_3"] },
    ]);
    await harness.waitForRun(runId, ["completed"]);
    await expect(harness.caller.runs.rerunFrom({ runId, stepId: "step_9" })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
    const rerun = await harness.caller.runs.rerunFrom({ runId, stepId: "step_3", args: { value: "new" } });
    expect(rerun.planVersion).toBe(2);
    const run = await harness.waitForRun(rerun.runId, ["completed"]);
    expect(run.rerunOf).toBe(runId);
    expect(run.steps.find((s) => s.stepId === "step_4")!.result?.value).toBe("new");
    const events = await readEvents(harness.app.db.pool, rerun.runId, 0);
    const ran = events.filter((e) => e.type === "step.running").map((e) => e.stepId);
    expect(ran.sort()).toEqual(["step_3", "step_4"]);
    const reused = run.steps.find((s) => s.stepId === "step_1")!;
    expect(reused).toMatchObject({ status: "completed", result: { ok: true, value: "expensive" } });
    expect(reused.reason).toBe(`Result reused from run ${runId}`);
    expect((await harness.caller.plans.get({ planId })).plan.version).toBe(2);
  });

  it("refuses to re-run a run that is still going", async () => {
    const { runId } = await createAndApprove([
      { id: "step_1", description: "slow", tool: "sleep", args: { ms: 3_000 } },
    ]);
    await expect(harness.caller.runs.rerunFrom({ runId, stepId: "step_1" })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
    });
    await harness.caller.runs.cancel({ runId });
  });
});
