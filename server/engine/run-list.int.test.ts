import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(async () => {
  await harness?.close();
});

async function startRun(goal: string, steps: unknown[]) {
  const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal, steps }) });
  const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
  return { planId: plan.id, runId };
}

describe("runs.list, runs.history and runs.decisions", () => {
  it("lists runs newest first with step counts, filters by state and plan, and pages with a cursor", async () => {
    const quick = [{ id: "step_1", description: "echo", tool: "echo", args: { value: 1 } }];
    const a = await startRun("A", quick);
    await harness.waitForRun(a.runId);
    const b = await startRun("B", [{ id: "step_1", description: "wait", tool: "sleep", args: { ms: 60_000 } }]);
    await harness.caller.runs.cancel({ runId: b.runId });
    const c = await startRun("C", quick);
    await harness.waitForRun(c.runId);

    const all = await harness.caller.runs.list({});
    const ours = all.runs.filter((run) => [a.runId, b.runId, c.runId].includes(run.id));
    expect(ours.map((run) => run.goal)).toEqual(["C", "B", "A"]);
    expect(ours[0]).toMatchObject({
      status: "completed",
      totalSteps: 1,
      stepCounts: { completed: 1 },
      approvedBy: "tester",
    });
    expect(all.statusCounts.cancelled).toBeGreaterThanOrEqual(1);

    const cancelled = await harness.caller.runs.list({ statuses: ["cancelled"] });
    expect(cancelled.runs.every((run) => run.status === "cancelled")).toBe(true);
    expect(cancelled.runs.map((run) => run.id)).toContain(b.runId);

    const ofA = await harness.caller.runs.list({ planId: a.planId });
    expect(ofA.runs.map((run) => run.id)).toEqual([a.runId]);

    const page1 = await harness.caller.runs.list({ limit: 2 });
    expect(page1.runs).toHaveLength(2);
    const page2 = await harness.caller.runs.list({ limit: 2, cursor: page1.nextCursor });
    const ids = [...page1.runs, ...page2.runs].map((run) => run.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining([a.runId, b.runId, c.runId]));

    await expect(harness.caller.runs.list({ cursor: "not-a-cursor" })).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(harness.caller.runs.list({ statuses: ["nope" as "failed"] })).rejects.toMatchObject({
      code: "BAD_REQUEST",
    });
  });

  it("reads a run's stored events by step and type up to a sequence number", async () => {
    const { runId } = await startRun("logs", [
      { id: "step_1", description: "sleep", tool: "sleep", args: { ms: 600 } },
      { id: "step_2", description: "echo", tool: "echo", args: { value: 2 } },
    ]);
    const run = await harness.waitForRun(runId);
    const progress = await harness.caller.runs.history({ runId, stepId: "step_1", types: ["step.progress"] });
    expect(progress.events.length).toBeGreaterThan(0);
    expect(progress.events.every((e) => e.stepId === "step_1" && e.type === "step.progress")).toBe(true);

    const upTo = await harness.caller.runs.history({ runId, upToSeq: 3 });
    expect(upTo.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    const paged = await harness.caller.runs.history({ runId, afterSeq: 1, limit: 2 });
    expect(paged).toMatchObject({ more: true });
    expect(paged.events.map((e) => e.seq)).toEqual([2, 3]);
    const everything = await harness.caller.runs.history({ runId });
    expect(everything.events.at(-1)!.seq).toBe(run.lastSeq);

    await expect(harness.caller.runs.history({ runId: "00000000-0000-4000-8000-000000000000" })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
  });

  it("lists who approved or denied which gated step", async () => {
    const { runId } = await startRun("gates", [
      { id: "step_1", description: "a", tool: "echo", args: { value: 1 }, approvalRequired: true },
      { id: "step_2", description: "b", tool: "echo", args: { value: 2 }, approvalRequired: true },
    ]);
    await harness.waitForRun(runId, ["running"]);
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: false, comment: "no" });
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    await harness.waitForRun(runId);
    const decisions = await harness.caller.runs.decisions({ runId });
    expect(decisions).toMatchObject([
      { stepId: "step_2", decision: "denied", actor: "tester", comment: "no", planVersion: 1 },
      { stepId: "step_1", decision: "approved", actor: "tester", comment: null, planVersion: 1 },
    ]);
  });
});

describe("runs.get", () => {
  it("is one consistent snapshot: replaying events up to its lastSeq gives exactly its step states", async () => {
    const steps = Array.from({ length: 40 }, (_, i) => ({
      id: `step_${i + 1}`,
      description: "echo",
      tool: "echo",
      args: { value: i },
      dependsOn: i >= 4 ? [`step_${i - 3}`] : [],
    }));
    const { runId } = await startRun("snapshots", steps);
    const snapshots = [];
    for (;;) {
      const snapshot = await harness.caller.runs.get({ runId });
      snapshots.push(snapshot);
      if (snapshot.status === "completed" || snapshot.status === "failed") break;
    }
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(snapshots.length).toBeGreaterThan(2);
    for (const snapshot of snapshots) {
      const replayed = new Map<string, unknown>(steps.map((step) => [step.id, "pending"]));
      for (const event of events) {
        if (event.seq > snapshot.lastSeq) break;
        if (event.stepId && "status" in event.data) replayed.set(event.stepId, event.data.status);
      }
      expect(Object.fromEntries(snapshot.steps.map((step) => [step.stepId, step.status]))).toEqual(
        Object.fromEntries(replayed),
      );
    }
  });
});
