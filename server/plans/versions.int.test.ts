import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readPlanEvents } from "../events/store";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";
import { listPlanVersions, renumberNewSteps, revisePlan, savePlanVersion } from "./versions";
import { sandboxAvailable } from "../tools/sandbox";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(() => harness.close());

const twoSteps = {
  goal: "Read then echo",
  steps: [
    { id: "step_1", description: "read", tool: "read_file", args: { path: "a.txt" } },
    { id: "step_2", description: "echo", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
  ],
};

async function newPlan() {
  return harness.caller.plans.createFromJson({ planJson: JSON.stringify(twoSteps) });
}

describe("savePlanVersion", () => {
  it("stores a change as version + 1, keeps the previous version and announces it", async () => {
    const plan = await newPlan();
    const { prisma } = harness.app.db;
    const edited = { ...twoSteps, steps: [twoSteps.steps[0]!, { ...twoSteps.steps[1]!, description: "say it" }] };
    const saved = await savePlanVersion(prisma, harness.app.tools, {
      planId: plan.id,
      baseVersion: 1,
      draft: edited,
      source: "manual",
      author: "tester",
      changeNote: "Edited step_2's description",
    });
    expect(saved.version).toBe(2);
    expect(saved.steps[1]!.description).toBe("say it");
    expect((await harness.caller.plans.get({ planId: plan.id, version: 1 })).plan.steps[1]!.description).toBe("echo");
    const history = await listPlanVersions(prisma, plan.id);
    expect(history.map((v) => [v.version, v.changeNote])).toEqual([
      [2, "Edited step_2's description"],
      [1, "Created"],
    ]);
    const events = await readPlanEvents(harness.app.db.pool, plan.id);
    expect(events.at(-1)).toMatchObject({ type: "plan.updated", data: { version: 2, baseVersion: 1 } });
  });

  it("refuses a change made on a stale version and changes nothing", async () => {
    const plan = await newPlan();
    const { prisma } = harness.app.db;
    const save = (changeNote: string) =>
      savePlanVersion(prisma, harness.app.tools, {
        planId: plan.id,
        baseVersion: 1,
        draft: { ...twoSteps, goal: changeNote },
        source: "manual",
        author: "tester",
        changeNote,
      });
    const results = await Promise.allSettled([save("first tab"), save("second tab")]);
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({ code: "version_conflict", details: { currentVersion: 2 } });
    expect(await listPlanVersions(prisma, plan.id)).toHaveLength(2);
  });

  it("refuses an invalid draft and a reused step id, storing nothing", async () => {
    const plan = await newPlan();
    const { prisma } = harness.app.db;
    const attempt = (draft: unknown) =>
      savePlanVersion(prisma, harness.app.tools, {
        planId: plan.id,
        baseVersion: 1,
        draft,
        source: "manual",
        author: "tester",
        changeNote: "x",
      });
    await expect(
      attempt({ ...twoSteps, steps: [{ ...twoSteps.steps[0]!, dependsOn: ["step_1"] }] }),
    ).rejects.toMatchObject({
      code: "invalid_plan",
    });
    // Remove step_2 (version 2), then try to bring back a different step under the same id.
    await attempt({ ...twoSteps, steps: [twoSteps.steps[0]!] });
    await expect(
      savePlanVersion(prisma, harness.app.tools, {
        planId: plan.id,
        baseVersion: 2,
        draft: { ...twoSteps, steps: [twoSteps.steps[0]!, { id: "step_2", tool: "echo", args: { value: 1 } }] },
        source: "manual",
        author: "tester",
        changeNote: "x",
      }),
    ).rejects.toMatchObject({ code: "invalid_plan", message: expect.stringContaining("step_2") });
    expect(await listPlanVersions(prisma, plan.id)).toHaveLength(2);
  });
});

describe("renumberNewSteps", () => {
  it("gives new steps fresh ids and rewrites dependencies and references to them", () => {
    const steps = renumberNewSteps(
      [
        { id: "step_1", dependsOn: [], args: {} },
        { id: "fetch", dependsOn: ["step_1"], args: { path: "x" } },
        { id: "use", dependsOn: ["fetch"], args: { value: "$fetch.body", list: ["$fetch", "$HOME"] } },
      ],
      new Set(["step_1"]),
      4,
    );
    expect(steps).toEqual([
      { id: "step_1", dependsOn: [], args: {} },
      { id: "step_5", dependsOn: ["step_1"], args: { path: "x" } },
      { id: "step_6", dependsOn: ["step_5"], args: { value: "$step_5.body", list: ["$step_5", "$HOME"] } },
    ]);
  });
});

describe("revisePlan", () => {
  const revise = (planId: string, baseVersion: number, steps: (base: { id: string }[]) => object[]) =>
    revisePlan(harness.app.db.prisma, harness.app.tools, {
      planId,
      baseVersion,
      revise: (base) => ({ ...base, steps: steps(base.steps) as { id: string }[] }),
      source: "llm",
      author: "tester",
      changeNote: "revised",
    });

  it("gives new steps ids never handed out before, even ids of removed steps", async () => {
    const plan = await newPlan();
    // Version 2 drops step_2; its number stays used.
    await revise(plan.id, 1, (steps) => [steps[0]!]);
    // The author names a new step "step_2" (it cannot know the history) and refers to it.
    const revised = await revise(plan.id, 2, (steps) => [
      ...steps,
      { id: "step_2", description: "again", tool: "echo", args: { value: "x" }, dependsOn: ["step_1"] },
      { id: "after", description: "use", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
    ]);
    expect(revised.newStepIds).toEqual(["step_3", "step_4"]);
    expect(revised.plan.version).toBe(3);
    expect(revised.plan.steps.map((s) => [s.id, s.dependsOn, s.args])).toEqual([
      ["step_1", [], { path: "a.txt" }],
      ["step_3", ["step_1"], { value: "x" }],
      ["step_4", ["step_3"], { value: "$step_3" }],
    ]);
  });

  it("refuses a revision of a version that is no longer current, storing nothing", async () => {
    const plan = await newPlan();
    await revise(plan.id, 1, (steps) => steps);
    await expect(revise(plan.id, 1, (steps) => steps)).rejects.toMatchObject({
      code: "version_conflict",
      details: { currentVersion: 2 },
    });
    expect(await listPlanVersions(harness.app.db.prisma, plan.id)).toHaveLength(2);
  });

  it("names the author's own step ids in the issues of a refused revision", async () => {
    const plan = await newPlan();
    await expect(
      revise(plan.id, 1, (steps) => [...steps, { id: "broken", tool: "echo", args: {}, dependsOn: ["step_1"] }]),
    ).rejects.toMatchObject({ code: "invalid_plan", details: [expect.objectContaining({ stepId: "broken" })] });
  });
});

describe("gates on edited arguments", () => {
  it("an argument edit that makes a shell step destructive gates it; only an explicit edit removes a gate", async () => {
    const { prisma } = harness.app.db;
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "shell",
        steps: [{ id: "step_1", description: "list", tool: "shell", args: { command: "ls -la" } }],
      }),
    });
    // Ungated where the sandbox can hold a read-only command to its word; gated everywhere else.
    expect(plan.steps[0]!.approvalRequired).toBe(!sandboxAvailable());
    // A form resends every field, including the old "approval required: no".
    const edited = await savePlanVersion(prisma, harness.app.tools, {
      planId: plan.id,
      baseVersion: 1,
      draft: { ...plan, steps: [{ ...plan.steps[0]!, args: { command: "rm -rf build" } }] },
      source: "manual",
      author: "tester",
      changeNote: "args",
    });
    expect(edited.steps[0]!.approvalRequired).toBe(true);
    // Without a person's waiver (an agent, an import, the API) the lowered gate is raised again.
    const notWaived = await savePlanVersion(prisma, harness.app.tools, {
      planId: plan.id,
      baseVersion: 2,
      draft: { ...edited, steps: [{ ...edited.steps[0]!, approvalRequired: false }] },
      source: "manual",
      author: "an agent",
      changeNote: "lower it",
    });
    expect(notWaived.steps[0]!.approvalRequired).toBe(true);
    // A person's explicit edit in the review page waives it, audited on that version.
    const waived = await harness.caller.plans.edit({
      planId: plan.id,
      baseVersion: 3,
      edit: { kind: "updateStep", stepId: "step_1", changes: { approvalRequired: false } },
    });
    expect(waived.plan.steps[0]!.approvalRequired).toBe(false);
    const audit = await prisma.auditEntry.findMany({ where: { planId: plan.id, action: "gate.waived" } });
    expect(audit.map((entry) => [entry.actor, entry.planVersion, entry.stepId])).toEqual([["tester", 4, "step_1"]]);
    // Later edits keep the waiver while the step is unchanged; new arguments need a new one.
    const renamed = await harness.caller.plans.edit({
      planId: plan.id,
      baseVersion: 4,
      edit: { kind: "updateStep", stepId: "step_1", changes: { description: "clean" } },
    });
    expect(renamed.plan.steps[0]!.approvalRequired).toBe(false);
    const rearmed = await harness.caller.plans.edit({
      planId: plan.id,
      baseVersion: 5,
      edit: { kind: "updateStep", stepId: "step_1", changes: { args: { command: "rm -rf dist" } } },
    });
    expect(rearmed.plan.steps[0]!.approvalRequired).toBe(true);
  });

  it("an agent's edit cannot waive a gate", async () => {
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "write",
        steps: [{ id: "step_1", tool: "write_file", args: { path: "a.txt", content: "a" } }],
      }),
    });
    const agent = createCaller(createTrpcContext(harness.app, { kind: "agent", name: "local agent" }));
    const edited = await agent.plans.edit({
      planId: plan.id,
      baseVersion: 1,
      edit: { kind: "updateStep", stepId: "step_1", changes: { approvalRequired: false } },
    });
    expect(edited.plan.steps[0]!.approvalRequired).toBe(true);
    expect(await harness.app.db.prisma.auditEntry.count({ where: { planId: plan.id, action: "gate.waived" } })).toBe(0);
  });
});
