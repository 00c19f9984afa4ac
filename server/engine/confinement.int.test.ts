import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { sandboxAvailable } from "../tools/sandbox";

/**
 * Confinement is decided by the worker that runs a step, not by the process that saved the plan:
 * a read-only shell step and a git_status step saved ungated where a sandbox existed must not run
 * unconfined on a worker without one (STEPWISE_SANDBOX=off) — they wait for a person, and run
 * once a person approves.
 */

let harness: Harness | undefined;
const before = process.env.STEPWISE_SANDBOX;
afterEach(async () => {
  if (before === undefined) delete process.env.STEPWISE_SANDBOX;
  else process.env.STEPWISE_SANDBOX = before;
  await harness?.close();
  harness = undefined;
});

async function stepOf(h: Harness, runId: string, stepId: string) {
  return (await h.caller.runs.get({ runId })).steps.find((step) => step.stepId === stepId)!;
}

describe.runIf(sandboxAvailable())("a step saved ungated, on a worker that cannot confine it", () => {
  it("waits for a person's approval instead of running unconfined, then runs once approved", async () => {
    harness = await startHarness();
    const ws = harness.workspace;
    await fs.writeFile(path.join(ws, "notes.txt"), "hello\n");
    execFileSync("git", ["init", "--quiet", "--initial-branch=main"], { cwd: ws });

    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "Look around",
        steps: [
          { id: "step_1", description: "read", tool: "shell", args: { command: "cat notes.txt" } },
          { id: "step_2", description: "status", tool: "git_status", args: {} },
        ],
      }),
    });
    // Saved where a sandbox exists: neither step is gated.
    expect(plan.steps.map((step) => step.approvalRequired)).toEqual([false, false]);

    // The worker that picks the steps up has no sandbox.
    process.env.STEPWISE_SANDBOX = "off";
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    for (const stepId of ["step_1", "step_2"]) {
      await expect
        .poll(async () => (await stepOf(harness!, runId, stepId)).status, { timeout: 15_000 })
        .toBe("awaiting_approval");
      const step = await stepOf(harness, runId, stepId);
      expect(step.result).toBeFalsy(); // it never ran
    }
    const requested = (await readEvents(harness.app.db.pool, runId, 0)).filter(
      (event) => event.type === "approval.requested",
    );
    expect(requested.map((event) => (event.data as { reason?: string }).reason)).toEqual([
      expect.stringMatching(/cannot confine/),
      expect.stringMatching(/cannot confine/),
    ]);

    // A person approves: the steps run (unconfined, as approved) and complete.
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const run = await harness.waitForRun(runId);
    const byId = Object.fromEntries(run.steps.map((step) => [step.stepId, step]));
    expect(byId.step_1!.status).toBe("completed");
    expect(byId.step_1!.result?.value).toMatchObject({ exitCode: 0, stdout: "hello\n" });
    expect(byId.step_2!.status).toBe("completed");
    expect(byId.step_2!.result?.value).toMatchObject({ branch: "main" });
  });

  it("runs the same steps without asking on a worker that can confine them", async () => {
    harness = await startHarness();
    await fs.writeFile(path.join(harness.workspace, "notes.txt"), "hello\n");
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "Look around",
        steps: [{ id: "step_1", description: "read", tool: "shell", args: { command: "cat notes.txt" } }],
      }),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    const run = await harness.waitForRun(runId);
    expect(run.steps[0]!.status).toBe("completed");
    expect(run.steps[0]!.result?.value).toMatchObject({ stdout: "hello\n" });
  });
});
