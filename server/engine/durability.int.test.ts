import { spawn, type ChildProcess } from "node:child_process";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { startStepWorker } from "./worker";

let harness: Harness | undefined;
let child: ChildProcess | undefined;
afterEach(async () => {
  child?.kill("SIGKILL");
  child = undefined;
  await harness?.close();
  harness = undefined;
});

function startWorkerProcess(databaseUrl: string, workspace: string): ChildProcess {
  return spawn(process.execPath, ["--import", "tsx", "server/cli/main.ts", "worker"], {
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
        args: { ms: 3000 },
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
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: 1 });
    await expect
      .poll(
        async () => (await harness!.caller.runs.get({ runId })).steps.filter((s) => s.status === "running").length,
        { timeout: 20_000 },
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
      const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 30_000);
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
  });
});
