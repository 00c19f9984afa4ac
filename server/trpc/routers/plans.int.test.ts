import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../../tests/app-harness";
import { readPlanEvents } from "../../events/store";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(() => harness.close());

const validPlan = {
  goal: "Read then echo",
  steps: [
    { id: "step_1", description: "read", tool: "read_file", args: { path: "a.txt" } },
    { id: "step_2", description: "echo", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
  ],
};

describe("plans router", () => {
  it("creates a plan from JSON with tool metadata filled in, lists it and announces its steps", async () => {
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify(validPlan) });
    expect(plan.id).toMatch(/^plan-[0-9a-f]{8}$/);
    expect(plan.version).toBe(1);
    expect(plan.steps[0]).toMatchObject({
      capability: "fs.read",
      capabilityLabel: "Read files",
      approvalRequired: false,
      order: 1,
    });
    const listed = await harness.caller.plans.list();
    expect(listed.map((p) => p.id)).toContain(plan.id);
    const { issues } = await harness.caller.plans.get({ planId: plan.id });
    expect(issues).toEqual([]);
    const events = await readPlanEvents(harness.app.db.pool, plan.id);
    expect(events.map((e) => `${e.type}:${e.stepId ?? ""}`)).toEqual([
      "plan.created:",
      "plan.step:step_1",
      "plan.step:step_2",
    ]);
    expect(events[1]!.data).toMatchObject({ step: { id: "step_1", state: "queued", tool: "read_file" } });
  });

  it("refuses bad input with a structured error and stores nothing", async () => {
    const before = await harness.app.db.prisma.plan.count();
    await expect(harness.caller.plans.createFromJson({ planJson: "{ nope" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: expect.stringContaining("Malformed JSON"),
    });
    const huge = JSON.stringify({ ...validPlan, summary: "x".repeat(1_100_000) });
    await expect(harness.caller.plans.createFromJson({ planJson: huge })).rejects.toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
    });
    const cyclic = {
      goal: "cycle",
      steps: [
        { id: "a", description: "a", tool: "echo", args: { value: 1 }, dependsOn: ["b"] },
        { id: "b", description: "b", tool: "nope", args: {}, dependsOn: ["a"] },
      ],
    };
    const error = await harness.caller.plans
      .createFromJson({ planJson: JSON.stringify(cyclic) })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "UNPROCESSABLE_CONTENT" });
    const details = (error as { cause: { details: { code: string }[] } }).cause.details;
    expect(details.map((issue) => issue.code).sort()).toEqual(["cycle", "unknown_tool"]);
    expect(await harness.app.db.prisma.plan.count()).toBe(before);
    expect(await harness.app.db.prisma.task.count()).toBe(before);
  });

  it("refuses to approve a version that does not exist", async () => {
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify(validPlan) });
    await expect(harness.caller.plans.approve({ planId: plan.id, version: 7 })).rejects.toMatchObject({
      code: "NOT_FOUND",
    });
  });
});
