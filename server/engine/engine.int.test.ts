import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const fanOutFanIn = {
  goal: "Fan out and in",
  steps: [
    { id: "step_1", description: "root", tool: "echo", args: { value: { n: 1, nested: { word: "hi" } } } },
    { id: "step_2", description: "left", tool: "sleep", args: { ms: 150 }, dependsOn: ["step_1"] },
    { id: "step_3", description: "right", tool: "echo", args: { value: "$step_1.nested.word" }, dependsOn: ["step_1"] },
    {
      id: "step_4",
      description: "join",
      tool: "echo",
      args: { value: ["$step_3", "$step_1.n"] },
      dependsOn: ["step_2", "step_3"],
    },
  ],
};

async function createAndApprove(h: Harness, draft: unknown) {
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify(draft) });
  return h.caller.plans.approve({ planId: plan.id, version: plan.version });
}

describe("engine on PostgreSQL", () => {
  it("runs a fan-out / fan-in plan to completion, resolving $step references", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, fanOutFanIn);
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.steps.map((s) => s.status)).toEqual(["completed", "completed", "completed", "completed"]);
    expect(run.steps[2]!.result?.value).toBe("hi");
    expect(run.steps[3]!.result?.value).toEqual(["hi", 1]);

    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    // A dependent never starts before its dependencies finished.
    const at = (type: string, stepId: string) => events.findIndex((e) => e.type === type && e.stepId === stepId);
    expect(at("step.running", "step_4")).toBeGreaterThan(at("step.completed", "step_2"));
    expect(at("step.running", "step_4")).toBeGreaterThan(at("step.completed", "step_3"));
    expect(events.at(-1)!.type).toBe("run.completed");
  });

  it("a run approved where a worker runs starts its first steps on it at once, and gives every slot back", async () => {
    harness = await startHarness({ concurrency: 3 });
    const roots = Array.from({ length: 5 }, (_, i) => ({
      id: `root_${i + 1}`,
      description: `root ${i + 1}`,
      tool: "sleep",
      args: { ms: 300 },
    }));
    const join = {
      id: "join",
      description: "join",
      tool: "echo",
      args: { value: 1 },
      dependsOn: roots.map((r) => r.id),
    };
    const slots = harness.app.engine.localWorker!.continuationSlots!;
    expect(slots.used).toBe(0);
    const { runId } = await createAndApprove(harness, { goal: "first steps", steps: [...roots, join] });
    // Claimed in the approving transaction, as far as the worker has slots; the rest were queued.
    expect(slots.used).toBe(3);
    const claimed = await harness.app.db.pool.query<{ step_id: string; worker_id: string }>(
      "select step_id, worker_id from run_steps where run_id = $1 and status = 'running' order by position",
      [runId],
    );
    expect(claimed.rows.slice(0, 3).map((row) => row.step_id)).toEqual(["root_1", "root_2", "root_3"]);
    expect(new Set(claimed.rows.slice(0, 3).map((row) => row.worker_id))).toEqual(
      new Set([harness.app.engine.localWorker!.workerId]),
    );
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    const events = await readEvents(harness.app.db.pool, runId, 0);
    const started = events.filter((e) => e.type === "step.running").map((e) => e.stepId);
    expect(started.sort()).toEqual([...roots.map((r) => r.id), "join"].sort());
    await expect.poll(() => slots.used, { timeout: 10_000 }).toBe(0);
  });

  it("waits at an approval gate and skips dependents that need a denied step's output", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, {
      goal: "Gated",
      steps: [
        { id: "step_1", description: "write", tool: "write_file", args: { path: "out.txt", content: "x" } },
        { id: "step_2", description: "uses output", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
        { id: "step_3", description: "independent of output", tool: "echo", args: { value: 1 }, dependsOn: ["step_1"] },
      ],
    });
    const waiting = await harness.waitForRun(runId, ["running"]);
    await expect
      .poll(async () => (await harness!.caller.runs.get({ runId })).steps[0]!.status)
      .toBe("awaiting_approval");
    expect(waiting.steps[1]!.status).toBe("pending");
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: false, comment: "not now" });
    const run = await harness.waitForRun(runId);
    expect(run.steps.map((s) => s.status)).toEqual(["skipped", "skipped", "completed"]);
    expect(run.steps[1]!.reason).toMatch(/step_1 was skipped/);
    await expect(fs.access(path.join(harness.workspace, "out.txt"))).rejects.toThrow();
  });

  it("blocks only the dependents of a failed step and finishes the rest", async () => {
    harness = await startHarness();
    const { runId } = await createAndApprove(harness, {
      goal: "Failure",
      steps: [
        { id: "step_1", description: "missing file", tool: "read_file", args: { path: "nope.txt" } },
        { id: "step_2", description: "after failure", tool: "echo", args: { value: 1 }, dependsOn: ["step_1"] },
        { id: "step_3", description: "independent", tool: "echo", args: { value: 2 } },
      ],
    });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("failed");
    expect(run.steps.map((s) => s.status)).toEqual(["failed", "blocked", "completed"]);
    expect(run.steps[0]!.result?.error).toBe("No such file or directory in the workspace: nope.txt");
  });
});
