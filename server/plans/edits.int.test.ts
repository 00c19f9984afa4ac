import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import type { PlanEdit } from "./edits";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(() => harness.close());

// step_1 ← step_2 ← step_4 (step_4 reads step_2's output), step_3 independent.
const chain = {
  goal: "Read, wait, echo",
  steps: [
    { id: "step_1", description: "read", tool: "read_file", args: { path: "a.txt" } },
    { id: "step_2", description: "echo it", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    { id: "step_3", description: "wait", tool: "sleep", args: { ms: 10 } },
    { id: "step_4", description: "done", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
  ],
};

async function newPlan(draft: unknown = chain) {
  return harness.caller.plans.createFromJson({ planJson: JSON.stringify(draft) });
}

async function edit(planId: string, baseVersion: number, edit: PlanEdit) {
  return (await harness.caller.plans.edit({ planId, baseVersion, edit })).plan;
}

async function versionCount(planId: string) {
  return (await harness.caller.plans.versions({ planId })).length;
}

describe("plan edits", () => {
  it("stores each edit as version + 1, keeps the previous one and records what changed", async () => {
    const plan = await newPlan();
    const v2 = await edit(plan.id, 1, {
      kind: "updateStep",
      stepId: "step_3",
      changes: { description: "pause", title: "Pause", args: { ms: 20 }, risk: "medium", critical: true },
    });
    expect(v2.version).toBe(2);
    expect(v2.steps[2]).toMatchObject({
      title: "Pause",
      description: "pause",
      args: { ms: 20 },
      risk: "medium",
      critical: true,
    });
    const v3 = await edit(plan.id, 2, {
      kind: "updateStep",
      stepId: "step_3",
      changes: { approvalRequired: true, timeoutSeconds: 90, retry: { maxAttempts: 5, backoffMs: 100 }, skipped: true },
    });
    expect(v3.steps[2]).toMatchObject({
      approvalRequired: true,
      timeoutSeconds: 90,
      retry: { maxAttempts: 5 },
      skipped: true,
    });
    const v4 = await edit(plan.id, 3, {
      kind: "updatePlan",
      changes: { goal: "New goal", successCriteria: ["it works"], questions: ["which file?"] },
    });
    expect(v4).toMatchObject({ goal: "New goal", successCriteria: ["it works"], questions: ["which file?"] });

    const first = await harness.caller.plans.get({ planId: plan.id, version: 1 });
    expect(first.plan.steps[2]).toMatchObject({ description: "wait", args: { ms: 10 }, skipped: false });
    const history = await harness.caller.plans.versions({ planId: plan.id });
    expect(history.map((v) => v.changeNote)).toEqual([
      "Edited the plan's goal, success criteria and questions",
      "Edited step_3: approval, timeout, retry policy and skipped",
      "Edited step_3: title, description, arguments, critical and risk",
      "Created",
    ]);
    expect(history[0]).toMatchObject({ author: "tester", source: "manual" });
  });

  it("names only what changed: a form resending the default retry policy and reordered arguments", async () => {
    const plan = await newPlan({
      goal: "One write",
      steps: [{ id: "step_1", description: "write", tool: "write_file", args: { path: "a.txt", content: "x" } }],
    });
    // What a form sends: every field, the retry policy as shown (the defaults) and the
    // arguments in the order it holds them, which need not be the order jsonb stored.
    const v2 = await edit(plan.id, 1, {
      kind: "updateStep",
      stepId: "step_1",
      changes: { args: { content: "y", path: "a.txt" }, retry: { maxAttempts: 3, backoffMs: 500 } },
    });
    const v3 = await edit(plan.id, v2.version, {
      kind: "updateStep",
      stepId: "step_1",
      changes: { args: { content: "y", path: "a.txt" }, retry: { backoffMs: 500, maxAttempts: 3 }, title: "Write" },
    });
    const history = await harness.caller.plans.versions({ planId: plan.id });
    expect(history.slice(0, 2).map((v) => v.changeNote)).toEqual(["Edited step_1: title", "Edited step_1: arguments"]);
    expect(v3.steps[0]!.args).toEqual({ path: "a.txt", content: "y" });
  });

  it("changing a step's tool brings the new tool's defaults unless the edit sets them", async () => {
    const plan = await newPlan();
    const v2 = await edit(plan.id, 1, {
      kind: "updateStep",
      stepId: "step_3",
      changes: { tool: "write_file", args: { path: "out.txt", content: "hi" } },
    });
    expect(v2.steps[2]).toMatchObject({
      tool: "write_file",
      capability: "fs.write",
      approvalRequired: true,
      risk: "high",
    });
  });

  it("refuses a dependency that would make a cycle, naming the cycle, and stores nothing", async () => {
    const plan = await newPlan();
    const refused = edit(plan.id, 1, { kind: "updateStep", stepId: "step_1", changes: { dependsOn: ["step_4"] } });
    await expect(refused).rejects.toMatchObject({
      message: expect.stringContaining("Circular dependency: step_1 → step_2 → step_4 → step_1"),
      cause: { code: "invalid_plan", details: [{ code: "cycle", steps: ["step_1", "step_2", "step_4"] }] },
    });
    await expect(
      edit(plan.id, 1, { kind: "updateStep", stepId: "step_1", changes: { dependsOn: ["step_1"] } }),
    ).rejects.toMatchObject({ message: "step_1 cannot depend on itself" });
    expect(await versionCount(plan.id)).toBe(1);
  });

  it("adding a dependency that sits below the step moves the step under it", async () => {
    const plan = await newPlan();
    const v2 = await edit(plan.id, 1, { kind: "updateStep", stepId: "step_1", changes: { dependsOn: ["step_3"] } });
    expect(v2.steps.map((s) => s.id)).toEqual(["step_3", "step_1", "step_2", "step_4"]);
  });

  it("refuses invalid arguments with the offending path, and a reference to a non-dependency", async () => {
    const plan = await newPlan();
    await expect(
      edit(plan.id, 1, { kind: "updateStep", stepId: "step_3", changes: { args: { ms: -5 } } }),
    ).rejects.toMatchObject({
      message: expect.stringMatching(/^This change was refused: step_3: args\.ms/),
      cause: { code: "invalid_plan", details: [{ code: "invalid_args", stepId: "step_3", path: ["args", "ms"] }] },
    });
    await expect(
      edit(plan.id, 1, { kind: "updateStep", stepId: "step_3", changes: { args: { ms: "$step_1" } } }),
    ).rejects.toMatchObject({ cause: { details: [{ code: "invalid_reference", stepId: "step_3" }] } });
    expect(await versionCount(plan.id)).toBe(1);
  });

  it("adds a step at a position with a fresh id that is never reused", async () => {
    const plan = await newPlan();
    const v2 = await edit(plan.id, 1, {
      kind: "addStep",
      position: 1,
      step: { tool: "echo", description: "check", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    });
    expect(v2.steps.map((s) => s.id)).toEqual(["step_1", "step_5", "step_2", "step_3", "step_4"]);
    expect(v2.steps[1]).toMatchObject({ capability: "data.transform", order: 2 });
    const v3 = await edit(plan.id, 2, { kind: "deleteStep", stepId: "step_5" });
    const v4 = await edit(plan.id, v3.version, {
      kind: "addStep",
      position: 0,
      step: { tool: "sleep", args: { ms: 1 } },
    });
    expect(v4.steps[0]!.id).toBe("step_6");
    await expect(
      edit(plan.id, v4.version, { kind: "addStep", position: 9, step: { tool: "sleep", args: { ms: 1 } } }),
    ).rejects.toMatchObject({ cause: { code: "invalid_input" } });
  });

  it("refuses deleting a step others depend on unless the links go too", async () => {
    const plan = await newPlan({
      goal: "g",
      steps: [
        { id: "step_1", tool: "sleep", args: { ms: 1 } },
        { id: "step_2", tool: "sleep", args: { ms: 1 }, dependsOn: ["step_1"] },
        { id: "step_3", tool: "sleep", args: { ms: 1 }, dependsOn: ["step_1", "step_2"] },
      ],
    });
    await expect(edit(plan.id, 1, { kind: "deleteStep", stepId: "step_1" })).rejects.toMatchObject({
      message: "step_1 cannot be deleted: step_2 and step_3 depend on it. Confirm to remove those links as well.",
      cause: { code: "invalid_state", details: { dependents: ["step_2", "step_3"] } },
    });
    expect(await versionCount(plan.id)).toBe(1);
    const v2 = await edit(plan.id, 1, { kind: "deleteStep", stepId: "step_1", removeLinks: true });
    expect(v2.steps.map((s) => [s.id, s.dependsOn])).toEqual([
      ["step_2", []],
      ["step_3", ["step_2"]],
    ]);
    expect((await harness.caller.plans.versions({ planId: plan.id }))[0]!.changeNote).toBe(
      "Deleted step_1 and its links from step_2 and step_3",
    );
  });

  it("a confirmed delete is still refused while a dependent reads the step's output", async () => {
    const plan = await newPlan();
    await expect(edit(plan.id, 1, { kind: "deleteStep", stepId: "step_2", removeLinks: true })).rejects.toMatchObject({
      message: expect.stringContaining("$step_2 refers to unknown step step_2"),
    });
    expect(await versionCount(plan.id)).toBe(1);
  });

  it("reorders within the dependency rule and refuses a move above a dependency", async () => {
    const plan = await newPlan();
    const v2 = await edit(plan.id, 1, { kind: "moveStep", stepId: "step_3", toIndex: 0 });
    expect(v2.steps.map((s) => [s.id, s.order])).toEqual([
      ["step_3", 1],
      ["step_1", 2],
      ["step_2", 3],
      ["step_4", 4],
    ]);
    await expect(edit(plan.id, 2, { kind: "moveStep", stepId: "step_4", toIndex: 1 })).rejects.toMatchObject({
      message: "step_4 cannot move above step_2: it depends on step_2, which must come first.",
      cause: { code: "invalid_input", details: { blockedBy: "step_2", relation: "dependency" } },
    });
    expect(await versionCount(plan.id)).toBe(2);
  });

  it("refuses an edit made on a stale version, telling the current one, and stores nothing", async () => {
    const plan = await newPlan();
    const [a, b] = await Promise.allSettled([
      edit(plan.id, 1, { kind: "updateStep", stepId: "step_1", changes: { description: "tab A" } }),
      edit(plan.id, 1, { kind: "updateStep", stepId: "step_1", changes: { description: "tab B" } }),
    ]);
    const results = [a, b];
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    const refused = results.find((r) => r.status === "rejected") as PromiseRejectedResult;
    expect(refused.reason).toMatchObject({
      message: expect.stringContaining("you edited version 1, the current version is 2"),
      cause: { code: "version_conflict", details: { currentVersion: 2 } },
    });
    // A later edit of the old version is refused the same way, even for a step that is gone.
    await edit(plan.id, 2, { kind: "addStep", position: 4, step: { tool: "sleep", args: { ms: 1 } } });
    await expect(edit(plan.id, 2, { kind: "deleteStep", stepId: "step_3" })).rejects.toMatchObject({
      cause: { code: "version_conflict", details: { currentVersion: 3 } },
    });
    expect(await versionCount(plan.id)).toBe(3);
  });

  it("undo stores a new version with the previous content, bringing deleted steps back under their ids", async () => {
    const plan = await newPlan();
    const v2 = await edit(plan.id, 1, { kind: "deleteStep", stepId: "step_3" });
    expect(v2.steps.map((s) => s.id)).not.toContain("step_3");
    const v3 = await edit(plan.id, 2, { kind: "undo" });
    expect(v3.version).toBe(3);
    expect(v3.steps).toEqual((await harness.caller.plans.get({ planId: plan.id, version: 1 })).plan.steps);
    expect((await harness.caller.plans.versions({ planId: plan.id }))[0]!.changeNote).toBe(
      "Undid version 2 (Deleted step_3)",
    );
    const fresh = await newPlan();
    await expect(edit(fresh.id, 1, { kind: "undo" })).rejects.toMatchObject({ cause: { code: "invalid_state" } });
  });

  it("imports JSON as a new version: exported JSON round-trips, new steps get fresh ids", async () => {
    const plan = await newPlan();
    const exported = await harness.caller.plans.export({ planId: plan.id, format: "json" });
    expect(exported.filename).toBe(`${plan.id}-v1.json`);
    const document = JSON.parse(exported.content);
    document.steps[0].description = "read again";
    document.steps.push({ id: "extra", tool: "echo", args: { value: "$step_4" }, dependsOn: ["step_4"] });
    const v2 = await edit(plan.id, 1, { kind: "import", planJson: JSON.stringify(document) });
    expect(v2).toMatchObject({ version: 2, source: "import", goal: chain.goal });
    expect(v2.steps.map((s) => s.id)).toEqual(["step_1", "step_2", "step_3", "step_4", "step_5"]);
    expect(v2.steps[4]).toMatchObject({ args: { value: "$step_4" }, dependsOn: ["step_4"] });
    const diff = await harness.caller.plans.diff({ planId: plan.id, from: 1, to: 2 });
    expect(diff.added.map((s) => s.id)).toEqual(["step_5"]);
    expect(diff.changed).toEqual([
      { id: "step_1", title: "read again", changes: [{ field: "description", before: "read", after: "read again" }] },
    ]);

    await expect(edit(plan.id, 2, { kind: "import", planJson: "{ nope" })).rejects.toMatchObject({
      cause: { code: "invalid_input" },
      message: expect.stringContaining("Malformed JSON"),
    });
    await expect(
      edit(plan.id, 2, { kind: "import", planJson: JSON.stringify({ steps: [{ id: "a", tool: "nope" }] }) }),
    ).rejects.toMatchObject({
      cause: { code: "invalid_plan", details: [expect.objectContaining({ stepId: "a" })] },
      message: expect.stringContaining("Unknown tool: nope"),
    });
    expect(await versionCount(plan.id)).toBe(2);
  });

  it("exports Markdown and describes tools with JSON schemas for the forms", async () => {
    const plan = await newPlan();
    const markdown = await harness.caller.plans.export({ planId: plan.id, format: "markdown" });
    expect(markdown.content).toContain("# Read, wait, echo");
    expect(markdown.content).toContain("### 2. echo it (`step_2`)");
    expect(markdown.content).toContain("- Depends on: `step_1`");
    const tools = await harness.caller.plans.tools();
    const sleep = tools.find((t) => t.name === "sleep")!;
    expect(sleep.inputSchema).toMatchObject({
      type: "object",
      properties: { ms: { type: "integer", minimum: 0 } },
      required: ["ms"],
    });
  });

  it("refuses malformed edits at the boundary", async () => {
    const plan = await newPlan();
    await expect(
      harness.caller.plans.edit({
        planId: plan.id,
        baseVersion: 1,
        edit: { kind: "updateStep", stepId: "step_1", changes: { status: "completed" } } as unknown as PlanEdit,
      }),
    ).rejects.toMatchObject({ code: "BAD_REQUEST" });
    await expect(edit(plan.id, 1, { kind: "updateStep", stepId: "step_9", changes: {} })).rejects.toMatchObject({
      cause: { code: "not_found" },
    });
    await expect(
      edit(plan.id, 1, { kind: "updateStep", stepId: "step_1", changes: { description: "read" } }),
    ).rejects.toMatchObject({ message: "Nothing to save: step_1 is unchanged" });
    await expect(edit("plan-00000000", 1, { kind: "undo" })).rejects.toMatchObject({ cause: { code: "not_found" } });
    expect(await versionCount(plan.id)).toBe(1);
  });
});
