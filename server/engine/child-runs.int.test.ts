import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

async function savedPlan(steps: unknown[]) {
  return harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "child", steps }) });
}

async function approvePlan(steps: unknown[]) {
  const plan = await savedPlan(steps);
  return harness.caller.plans.approve({ planId: plan.id, version: plan.version });
}

/** The child run a `run_plan` step started, once it has one. */
async function childOf(runId: string, stepId: string, timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await harness.app.db.pool.query<{ id: string }>(
      "select id from runs where parent_run_id = $1 and parent_step_id = $2",
      [runId, stepId],
    );
    if (rows[0]) return rows[0].id;
    if (Date.now() > deadline) throw new Error(`${stepId} of ${runId} started no child run`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const subPlanStep = (childPlanId: string, extra: Record<string, unknown> = {}) => ({
  id: "step_2",
  description: "Run the child plan",
  tool: "run_plan",
  args: { plan_id: childPlanId, version: 1 },
  dependsOn: ["step_1"],
  ...extra,
});

describe("sub-plans (run_plan)", () => {
  it("is gated: the parent's step runs the child only once approved, and completes with the child's outputs", async () => {
    const child = await savedPlan([
      { id: "step_1", description: "child work", tool: "echo", args: { value: "from the child" } },
    ]);
    const { runId } = await approvePlan([
      { id: "step_1", description: "before", tool: "echo", args: { value: 1 } },
      subPlanStep(child.id),
      {
        id: "step_3",
        description: "after",
        tool: "echo",
        args: { value: "$step_2.outputs.step_1" },
        dependsOn: ["step_2"],
      },
    ]);
    await harness.waitForStep(runId, "step_2", "awaiting_approval");
    const none = await harness.app.db.pool.query("select 1 from runs where parent_run_id = $1", [runId]);
    expect(none.rowCount).toBe(0);

    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const childRunId = await childOf(runId, "step_2");
    const parent = await harness.waitForRun(runId);
    expect(parent.status).toBe("completed");
    const step2 = parent.steps.find((s) => s.stepId === "step_2")!;
    expect(step2.result).toMatchObject({
      ok: true,
      value: {
        run_id: childRunId,
        plan_id: child.id,
        version: 1,
        status: "completed",
        outputs: { step_1: "from the child" },
      },
    });
    expect(parent.steps.find((s) => s.stepId === "step_3")!.result).toMatchObject({
      ok: true,
      value: "from the child",
    });

    const childRun = await harness.caller.runs.get({ runId: childRunId });
    expect(childRun.status).toBe("completed");
    expect(childRun.parent).toEqual({ runId, stepId: "step_2" });
    // The person who approved the step approved the child run; the parent's timeline and audit link them.
    expect(childRun.approvedBy).toBe("tester");
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.find((e) => e.type === "child_run.started")).toMatchObject({
      stepId: "step_2",
      data: { childRunId, planId: child.id, version: 1 },
    });
    const audit = await harness.app.db.pool.query<{ action: string; detail: { childRunId?: string } }>(
      "select action, detail from audit_entries where run_id = $1 and action = 'run.child_started'",
      [runId],
    );
    expect(audit.rows[0]?.detail.childRunId).toBe(childRunId);
  });

  it("says in the Markdown export which plan version a sub-plan step runs", async () => {
    const child = await savedPlan([{ id: "step_1", description: "child work", tool: "echo", args: { value: 1 } }]);
    const parent = await savedPlan([
      { id: "step_1", description: "before", tool: "echo", args: { value: 1 } },
      subPlanStep(child.id),
    ]);
    // The review's checks find nothing wrong with a sub-plan step's filled-in fields (its timeout included).
    expect((await harness.caller.plans.get({ planId: parent.id, version: 1 })).issues).toEqual([]);
    const markdown = await harness.caller.plans.export({ planId: parent.id, format: "markdown" });
    expect(markdown.content).toContain(
      `- Sub-plan: runs plan \`${child.id}\` version 1 as a child run; its gated steps wait for their own approval`,
    );
    expect(markdown.content).toContain("requires approval");
  });

  it("fails the parent step when the child run fails, and the parent run with it", async () => {
    const child = await savedPlan([
      { id: "step_1", description: "breaks", tool: "read_file", args: { path: "no-such-file.txt" }, critical: true },
    ]);
    const { runId } = await approvePlan([
      { id: "step_1", description: "before", tool: "echo", args: { value: 1 } },
      subPlanStep(child.id),
    ]);
    await harness.waitForStep(runId, "step_2", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const childRunId = await childOf(runId, "step_2");
    const step = await harness.waitForStep(runId, "step_2", "failed");
    expect(step.error).toContain(`Sub-plan run ${childRunId} failed`);
    expect((await harness.caller.runs.get({ runId: childRunId })).status).toBe("failed");
  });

  it("keeps the child's gates the child's, and cancelling the parent cancels the child", async () => {
    const child = await savedPlan([
      {
        id: "step_1",
        description: "a gated step of the child",
        tool: "echo",
        args: { value: 1 },
        approvalRequired: true,
      },
    ]);
    const { runId } = await approvePlan([
      { id: "step_1", description: "before", tool: "echo", args: { value: 1 } },
      subPlanStep(child.id),
    ]);
    await harness.waitForStep(runId, "step_2", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const childRunId = await childOf(runId, "step_2");
    // The parent's approval started the child; the child's gated step waits for a decision of its own.
    await harness.waitForStep(childRunId, "step_1", "awaiting_approval");
    const waiting = await harness.caller.runs.get({ runId });
    expect(waiting.steps.find((s) => s.stepId === "step_2")).toMatchObject({
      status: "running",
      waiting: { kind: "child_run", runId: childRunId },
    });

    await harness.caller.runs.cancel({ runId });
    const cancelled = await harness.waitForRun(childRunId);
    expect(cancelled.status).toBe("cancelled");
    expect(cancelled.steps[0]!.status).toBe("cancelled");
    expect(cancelled.steps[0]!.reason).toContain(`parent run ${runId} was cancelled`);
  });

  it("a gate inside the child, once approved there, lets the child and then the parent complete", async () => {
    const child = await savedPlan([
      { id: "step_1", description: "gated in the child", tool: "echo", args: { value: "ok" }, approvalRequired: true },
    ]);
    const { runId } = await approvePlan([
      { id: "step_1", description: "before", tool: "echo", args: { value: 1 } },
      subPlanStep(child.id),
    ]);
    await harness.waitForStep(runId, "step_2", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const childRunId = await childOf(runId, "step_2");
    await harness.waitForStep(childRunId, "step_1", "awaiting_approval");
    await harness.caller.runs.decide({ runId: childRunId, stepId: "step_1", approve: true });
    expect((await harness.waitForRun(runId)).status).toBe("completed");
  });

  it("runs a template with parameters taken from an earlier output", async () => {
    const source = await savedPlan([
      { id: "step_1", description: "say {{who}}", tool: "echo", args: { value: "hello {{who}}" } },
    ]);
    const template = await harness.caller.templates.save({ planId: source.id, version: source.version, name: "Greet" });
    const { runId } = await approvePlan([
      { id: "step_1", description: "who", tool: "echo", args: { value: "world" } },
      {
        id: "step_2",
        description: "Greet them",
        tool: "run_plan",
        args: { template_id: template.id, params: { who: "$step_1" } },
        dependsOn: ["step_1"],
      },
    ]);
    await harness.waitForStep(runId, "step_2", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const parent = await harness.waitForRun(runId);
    expect(parent.status).toBe("completed");
    expect(parent.steps[1]!.result).toMatchObject({ ok: true, value: { outputs: { step_1: "hello world" } } });
  });

  it("fails the step with a clear reason when the named plan version does not exist", async () => {
    const { runId } = await approvePlan([
      { id: "step_1", description: "before", tool: "echo", args: { value: 1 } },
      subPlanStep("00000000-0000-4000-8000-000000000000"),
    ]);
    await harness.waitForStep(runId, "step_2", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const step = await harness.waitForStep(runId, "step_2", "failed");
    expect(step.error).toMatch(/The sub-plan could not start: .*(no version|not found|No plan)/i);
  });

  it("refuses a run_plan step without an exact version at plan time", async () => {
    const error = await savedPlan([
      { id: "step_1", description: "latest?", tool: "run_plan", args: { plan_id: "x" } },
    ]).catch((e: unknown) => e);
    // tRPC wraps the domain's error; its cause carries the issues, which name the missing version.
    const details = JSON.stringify((error as { cause?: { details?: unknown } }).cause?.details);
    expect(details).toContain("step_1");
    expect(details).toMatch(/version/i);
  });
});
