import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { builtinTools, createToolRegistry } from "../tools/registry";
import { defineTool, RetryableToolError } from "../tools/types";
import type { RunStepView } from "./run-view";

/**
 * Conditions (`when`) and fan-out (`forEach`) on the real engine: what runs, what is skipped and
 * why, instances as steps of their own, and the gate on a fan-out's concrete list.
 */

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** Fails every attempt: a step that does not complete. */
const fail = defineTool({
  name: "fail",
  description: "Fails.",
  inputSchema: z.object({}),
  capability: "data.transform",
  capabilityLabel: "Transform data",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 10,
  async execute() {
    throw new Error("failed on purpose");
  },
});

/** Fails with a retryable error the first time it sees a key, then returns the key. */
const seen = new Set<string>();
const flaky = defineTool({
  name: "flaky",
  description: "Fails once per key.",
  inputSchema: z.object({ key: z.string() }),
  capability: "data.transform",
  capabilityLabel: "Transform data",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 10,
  async execute({ key }) {
    if (!seen.has(key)) {
      seen.add(key);
      throw new RetryableToolError(`first try of ${key}`);
    }
    return key;
  },
});

/** A tool with a side effect: gated, so each instance waits for a person. */
const stamped: string[] = [];
const stamp = defineTool({
  name: "stamp",
  description: "Records its value (a side effect).",
  inputSchema: z.object({ value: z.string() }),
  capability: "data.transform",
  capabilityLabel: "Transform data",
  readOnly: false,
  destructive: false,
  idempotent: false,
  requiresApproval: true,
  defaultTimeoutSeconds: 10,
  async execute({ value }) {
    stamped.push(value);
    return value;
  },
});

const tools = createToolRegistry([...builtinTools, fail, flaky, stamp]);

async function run(steps: unknown[]) {
  const h = harness!;
  const plan = await h.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "branch", steps }) });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  return runId;
}

const byId = (view: { steps: unknown[] }) => new Map((view.steps as RunStepView[]).map((step) => [step.stepId, step]));

describe("conditions", () => {
  it("runs a step whose condition holds, skips one whose condition is false, with the reason", async () => {
    harness = await startHarness({ tools });
    const runId = await run([
      { id: "step_1", tool: "echo", args: { value: { code: 1, files: ["a", "b"] } } },
      { id: "step_2", tool: "echo", args: { value: "fix" }, dependsOn: ["step_1"], when: "$step_1.code != 0" },
      { id: "step_3", tool: "echo", args: { value: "ship" }, dependsOn: ["step_1"], when: "$step_1.code == 0" },
      { id: "step_4", tool: "echo", args: { value: "after" }, dependsOn: ["step_3"] },
      { id: "step_5", tool: "echo", args: { value: "$step_3" }, dependsOn: ["step_3"] },
      {
        id: "step_6",
        tool: "echo",
        args: { value: 6 },
        dependsOn: ["step_1"],
        when: "$step_1.files.length > 1 && !($step_1.code > 5)",
      },
    ]);
    const view = await harness.waitForRun(runId);
    const steps = byId(view);
    expect(view.status).toBe("completed");
    expect(steps.get("step_2")!.status).toBe("completed");
    expect(steps.get("step_3")!.status).toBe("skipped");
    expect(steps.get("step_3")!.reason).toBe("Condition not met: step_1's code is 0");
    // A skipped step's dependents go on unless they need its output.
    expect(steps.get("step_4")!.status).toBe("completed");
    expect(steps.get("step_5")!.status).toBe("skipped");
    expect(steps.get("step_6")!.status).toBe("completed");
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.find((e) => e.type === "step.skipped" && e.stepId === "step_3")!.data).toMatchObject({
      reason: "Condition not met: step_1's code is 0",
    });
  });

  it("reads the status of a failed or skipped step; other fields of it make the condition false", async () => {
    harness = await startHarness({ tools });
    const runId = await run([
      { id: "step_1", tool: "fail", args: {}, retry: { maxAttempts: 1 } },
      { id: "step_2", tool: "echo", args: { value: "repair" }, when: '$step_1.status == "failed"' },
      { id: "step_3", tool: "echo", args: { value: "x" }, when: "$step_1.code == 1" },
      { id: "step_4", tool: "echo", args: { value: "y" }, when: '$step_3.status == "skipped"' },
      { id: "step_5", tool: "echo", args: { value: "z" }, when: "$step_3.value == 1" },
    ]);
    const view = await harness.waitForRun(runId);
    const steps = byId(view);
    // The failed step still fails the run; the branch on its failure ran.
    expect(view.status).toBe("failed");
    expect(steps.get("step_2")!.status).toBe("completed");
    expect(steps.get("step_3")!).toMatchObject({
      status: "skipped",
      reason: "Condition not met: step_1 did not complete (failed)",
    });
    expect(steps.get("step_4")!.status).toBe("completed");
    expect(steps.get("step_5")!).toMatchObject({
      status: "skipped",
      reason: "Condition not met: step_3 did not complete (skipped)",
    });
  });
});

describe("fan-out", () => {
  const list = (items: unknown[]) => ({ id: "step_1", tool: "echo", args: { value: { files: items } } });
  const each = (extra: Record<string, unknown> = {}) => ({
    id: "step_2",
    tool: "echo",
    args: { value: { file: "$item.name", from: "$step_1.files" } },
    dependsOn: ["step_1"],
    forEach: "$step_1.files",
    ...extra,
  });
  const join = { id: "step_3", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] };

  it("runs one instance per element, each a step of the run, and its dependents after the whole group", async () => {
    harness = await startHarness({ tools });
    const files = [{ name: "a.ts" }, { name: "b.ts" }, { name: "c.ts" }];
    const runId = await run([list(files), each(), join]);
    const view = await harness.waitForRun(runId);
    expect(view.status).toBe("completed");
    const steps = byId(view);
    expect(steps.get("step_2")).toMatchObject({ status: "completed", groupSize: 3 });
    for (const [index, file] of files.entries()) {
      expect(steps.get(`step_2[${index}]`)).toMatchObject({
        status: "completed",
        group: "step_2",
        item: file,
        result: expect.objectContaining({ value: { file: file.name, from: files } }),
      });
    }
    // The group's output is its instances' outputs in list order, which its dependent reads.
    expect(steps.get("step_3")!.result?.value).toEqual(files.map((f) => ({ file: f.name, from: files })));
    const events = await readEvents(harness.app.db.pool, runId, 0);
    const at = (type: string, stepId: string) => events.findIndex((e) => e.type === type && e.stepId === stepId);
    for (let index = 0; index < 3; index++) {
      expect(events[at("step.completed", `step_2[${index}]`)]!.data).toMatchObject({ group: "step_2" });
      expect(at("step.running", "step_3")).toBeGreaterThan(at("step.completed", `step_2[${index}]`));
    }
    expect(events[at("step.running", "step_2")]!.data).toMatchObject({
      instances: ["step_2[0]", "step_2[1]", "step_2[2]"],
    });
  });

  it("completes a group of none at once and a group of one with its one output", async () => {
    harness = await startHarness({ tools });
    const empty = await run([list([]), each(), join]);
    const one = await run([list([{ name: "only.ts" }]), each(), join]);
    const emptyView = await harness.waitForRun(empty);
    expect(emptyView.status).toBe("completed");
    expect(byId(emptyView).get("step_3")!.result?.value).toEqual([]);
    expect(emptyView.steps.some((step) => step.stepId.startsWith("step_2["))).toBe(false);
    const oneView = await harness.waitForRun(one);
    expect(oneView.status).toBe("completed");
    expect(byId(oneView).get("step_3")!.result?.value).toEqual([{ file: "only.ts", from: [{ name: "only.ts" }] }]);
  });

  it("fails the step, running nothing, when the list is over the cap", async () => {
    harness = await startHarness({ tools });
    const runId = await run([list([{ name: "1" }, { name: "2" }, { name: "3" }]), each({ maxItems: 2 }), join]);
    const view = await harness.waitForRun(runId);
    const steps = byId(view);
    expect(view.status).toBe("failed");
    expect(steps.get("step_2")).toMatchObject({ status: "failed" });
    expect(steps.get("step_2")!.reason).toBe(
      "$step_1.files has 3 elements, more than the cap of 2 (maxItems); nothing ran",
    );
    expect(steps.get("step_3")!.status).toBe("blocked");
    expect(view.steps.some((step) => step.stepId.startsWith("step_2["))).toBe(false);
  });

  it("retries a failing instance on its own, as any step", async () => {
    harness = await startHarness({ tools });
    const runId = await run([
      { id: "step_1", tool: "echo", args: { value: ["k1", "k2"] } },
      {
        id: "step_2",
        tool: "flaky",
        args: { key: "$item" },
        dependsOn: ["step_1"],
        forEach: "$step_1",
        retry: { maxAttempts: 3, backoffMs: 0 },
      },
    ]);
    const view = await harness.waitForRun(runId);
    expect(view.status).toBe("completed");
    const steps = byId(view);
    expect(steps.get("step_2[0]")).toMatchObject({ status: "completed", attempt: 2 });
    expect(steps.get("step_2[1]")).toMatchObject({ status: "completed", attempt: 2 });
    expect(steps.get("step_2")!.result?.value).toEqual(["k1", "k2"]);
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(
      events
        .filter((e) => e.type === "step.retrying")
        .map((e) => e.stepId)
        .sort(),
    ).toEqual(["step_2[0]", "step_2[1]"]);
  });

  it("a gated fan-out waits for a decision on the concrete list, and runs exactly what was approved", async () => {
    harness = await startHarness({ tools });
    stamped.length = 0;
    const runId = await run([
      { id: "step_1", tool: "echo", args: { value: ["red", "blue"] } },
      { id: "step_2", tool: "stamp", args: { value: "$item" }, dependsOn: ["step_1"], forEach: "$step_1" },
    ]);
    const h = harness;
    await expect
      .poll(
        async () => (await h.caller.runs.get({ runId })).steps.filter((s) => s.status === "awaiting_approval").length,
        {
          timeout: 20_000,
        },
      )
      .toBe(2);
    const group = await h.caller.runs.group({ runId, stepId: "step_2" });
    expect(group.instances.map((i) => [i.stepId, i.item, i.approval?.resolvedArgs])).toEqual([
      ["step_2[0]", "red", { value: "red" }],
      ["step_2[1]", "blue", { value: "blue" }],
    ]);
    expect(stamped).toEqual([]);
    const { decided } = await h.caller.runs.decideGroup({
      runId,
      stepId: "step_2",
      approve: true,
      listHash: group.listHash,
    });
    expect(decided).toEqual(["step_2[0]", "step_2[1]"]);
    const view = await h.waitForRun(runId);
    expect(view.status).toBe("completed");
    expect(stamped.sort()).toEqual(["blue", "red"]);
  });

  it("a decision on a list other than the one there now is refused and nothing runs", async () => {
    harness = await startHarness({ tools });
    stamped.length = 0;
    const h = harness;
    const shown = await run([
      { id: "step_1", tool: "echo", args: { value: ["red", "blue"] } },
      { id: "step_2", tool: "stamp", args: { value: "$item" }, dependsOn: ["step_1"], forEach: "$step_1" },
    ]);
    const now = await run([
      { id: "step_1", tool: "echo", args: { value: ["red", "green"] } },
      { id: "step_2", tool: "stamp", args: { value: "$item" }, dependsOn: ["step_1"], forEach: "$step_1" },
    ]);
    for (const runId of [shown, now]) {
      await expect
        .poll(
          async () => (await h.caller.runs.get({ runId })).steps.filter((s) => s.status === "awaiting_approval").length,
          {
            timeout: 20_000,
          },
        )
        .toBe(2);
    }
    // The person saw red, blue; the list there now is red, green: the same template, another list.
    const seenList = await h.caller.runs.group({ runId: shown, stepId: "step_2" });
    const current = await h.caller.runs.group({ runId: now, stepId: "step_2" });
    expect(current.listHash).not.toBe(seenList.listHash);
    await expect(
      h.caller.runs.decideGroup({ runId: now, stepId: "step_2", approve: true, listHash: seenList.listHash }),
    ).rejects.toThrow(/not the one shown to you/);
    // An instance's own decision binds to its element too: blue's hash does not approve green.
    await expect(
      h.caller.runs.decide({
        runId: now,
        stepId: "step_2[1]",
        approve: true,
        definitionHash: seenList.instances[1]!.approval!.definitionHash,
      }),
    ).rejects.toThrow(/changed after it was shown/);
    const view = await h.caller.runs.get({ runId: now });
    expect(byId(view).get("step_2[1]")!.status).toBe("awaiting_approval");
    expect(stamped).toEqual([]);
    // Decided on the list as it is, it runs.
    await h.caller.runs.decideGroup({ runId: now, stepId: "step_2", approve: true, listHash: current.listHash });
    expect((await h.waitForRun(now)).status).toBe("completed");
    expect(stamped.sort()).toEqual(["green", "red"]);
  });
});
