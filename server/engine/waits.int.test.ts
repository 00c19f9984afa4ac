import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { APPROVAL_EXPIRY_TASK, APPROVAL_WARNING_TASK } from "../queue/jobs";
import { startStepWorker } from "./worker";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness();
});
afterAll(() => harness.close());

async function createAndApprove(
  steps: unknown[],
  options: { approvalTimeoutSeconds?: number; approvalWarningSeconds?: number } = {},
) {
  const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "waits", steps }) });
  return harness.caller.plans.approve({ planId: plan.id, version: plan.version, ...options });
}

async function eventsOf(runId: string) {
  return readEvents(harness.app.db.pool, runId, 0);
}

/**
 * Makes a run's approval timer jobs (the warning, the expiry, or both) due now, and waits until the
 * worker ran them: the test decides when time has passed, not the machine's speed.
 */
async function fireApprovalTimers(runId: string, tasks = [APPROVAL_WARNING_TASK, APPROVAL_EXPIRY_TASK]) {
  const pending = () =>
    harness.app.db.pool.query<{ id: string }>(
      // Timer jobs are keyed `<task>:<run id>:<step id>:<expiry>` (queue.ts).
      "select id from graphile_worker.jobs where task_identifier = any($1::text[]) and key like $2",
      [tasks, `%:${runId}:%`],
    );
  const ids = (await pending()).rows.map((row) => row.id);
  expect(ids.length).toBeGreaterThan(0);
  await harness.app.db.pool.query("select graphile_worker.reschedule_jobs($1::bigint[], run_at => now())", [ids]);
  await expect.poll(async () => (await pending()).rowCount, { timeout: 45_000 }).toBe(0);
}

describe("approval timeouts", () => {
  it("warns before expiry, then skips the undecided step with the reason; its dependents follow the rules", async () => {
    const { runId } = await createAndApprove(
      [
        { id: "step_1", description: "gated", tool: "echo", args: { value: 1 }, approvalRequired: true },
        {
          id: "step_2",
          description: "needs its output",
          tool: "echo",
          args: { value: "$step_1" },
          dependsOn: ["step_1"],
        },
        { id: "step_3", description: "ordered after", tool: "echo", args: { value: 3 }, dependsOn: ["step_1"] },
      ],
      // An hour, warned a minute before; the test makes each timer due in turn. (With 2 s and 1 s
      // a busy worker found both due at once and the expiry could land before the warning.)
      { approvalTimeoutSeconds: 3_600, approvalWarningSeconds: 60 },
    );
    const waiting = await harness.waitForStep(runId, "step_1", "awaiting_approval");
    expect(waiting.waiting).toMatchObject({ kind: "approval", expiresAt: expect.any(String) });
    await fireApprovalTimers(runId, [APPROVAL_WARNING_TASK]);
    expect((await harness.caller.runs.get({ runId })).steps[0]!.status).toBe("awaiting_approval");
    await fireApprovalTimers(runId, [APPROVAL_EXPIRY_TASK]);
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.steps.map((s) => [s.stepId, s.status])).toEqual([
      ["step_1", "skipped"],
      ["step_2", "skipped"],
      ["step_3", "completed"],
    ]);
    expect(run.steps[0]!.reason).toBe("No approval decision within 60 minutes");
    expect(run.steps[0]!.waiting).toBeUndefined();
    const types = (await eventsOf(runId)).filter((e) => e.stepId === "step_1").map((e) => e.type);
    expect(types).toEqual(["step.awaiting_approval", "approval.requested", "approval.expiring", "step.skipped"]);
    const audit = await harness.app.db.prisma.auditEntry.findMany({
      where: { runId, action: "step.approval_expired" },
    });
    expect(audit).toHaveLength(1);
    expect(audit[0]).toMatchObject({ actor: "system", stepId: "step_1" });
  });

  it("a decision in time cancels the expiry: the approved step runs and is never skipped later", async () => {
    const { runId } = await createAndApprove(
      [{ id: "step_1", description: "gated", tool: "echo", args: { value: 1 }, approvalRequired: true }],
      // Long enough that the decision is always in time, however busy the machine.
      { approvalTimeoutSeconds: 3_600, approvalWarningSeconds: 60 },
    );
    await harness.waitForStep(runId, "step_1", "awaiting_approval");
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    await harness.waitForRun(runId, ["completed"]);
    // The warning and expiry timers still fire; they must find the wait gone and change nothing.
    await fireApprovalTimers(runId);
    const run = await harness.caller.runs.get({ runId });
    expect(run.steps[0]!.status).toBe("completed");
    expect((await eventsOf(runId)).map((e) => e.type)).not.toContain("approval.expiring");
  });
});

describe("ask_user", () => {
  it("waits with input.requested until the answer arrives; the answer becomes the step's output", async () => {
    const { runId } = await createAndApprove([
      { id: "step_1", description: "options", tool: "echo", args: { value: { q: "Which colour?" } } },
      {
        id: "step_2",
        description: "ask",
        tool: "ask_user",
        args: { question: "$step_1.q", choices: ["red", "blue"] },
        dependsOn: ["step_1"],
      },
      { id: "step_3", description: "use", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
    ]);
    const waiting = await harness.waitForStep(runId, "step_2", "awaiting_input");
    expect(waiting.waiting).toEqual({ kind: "input", question: "Which colour?", choices: ["red", "blue"] });
    expect((await eventsOf(runId)).find((e) => e.type === "input.requested")).toMatchObject({
      stepId: "step_2",
      data: { question: "Which colour?", choices: ["red", "blue"] },
    });
    await expect(harness.caller.runs.answer({ runId, stepId: "step_2", answer: "green" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: "The answer must be one of: red, blue",
    });
    await expect(harness.caller.runs.answer({ runId, stepId: "step_1", answer: "red" })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
    });
    await harness.caller.runs.answer({ runId, stepId: "step_2", answer: "blue" });
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps[1]!.result).toMatchObject({ ok: true, value: "blue" });
    expect(run.steps[2]!.result).toMatchObject({ ok: true, value: "blue" });
    await expect(harness.caller.runs.answer({ runId, stepId: "step_2", answer: "red" })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
    });
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { runId, action: "step.answered" } });
    expect(audit).toMatchObject([{ actor: "tester", stepId: "step_2", detail: { answer: "blue" } }]);
  });

  it("a waiting question does not hold a parallel slot, and cancelling the run cancels it", async () => {
    const { runId } = await createAndApprove([
      { id: "step_1", description: "ask", tool: "ask_user", args: { question: "Go on?" } },
      { id: "step_2", description: "independent", tool: "echo", args: { value: 2 } },
    ]);
    await harness.waitForStep(runId, "step_2", "completed");
    await harness.waitForStep(runId, "step_1", "awaiting_input");
    await harness.caller.runs.cancel({ runId });
    const run = await harness.waitForRun(runId, ["cancelled"]);
    expect(run.steps.map((s) => s.status)).toEqual(["cancelled", "completed"]);
  });

  it("an answer given while no worker runs takes effect when a worker comes back", async () => {
    const own = await startHarness();
    try {
      const plan = await own.caller.plans.createFromJson({
        planJson: JSON.stringify({
          goal: "ask",
          steps: [
            { id: "step_1", description: "ask", tool: "ask_user", args: { question: "Name?" } },
            { id: "step_2", description: "greet", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
          ],
        }),
      });
      const { runId } = await own.caller.plans.approve({ planId: plan.id, version: 1 });
      await own.waitForRun(runId, ["running"]);
      const deadline = Date.now() + 60_000;
      while ((await own.caller.runs.get({ runId })).steps[0]!.status !== "awaiting_input") {
        if (Date.now() > deadline) throw new Error("step_1 never asked");
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      await own.app.worker!.stop();
      await own.caller.runs.answer({ runId, stepId: "step_1", answer: "Ada" });
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect((await own.caller.runs.get({ runId })).steps.map((s) => s.status)).toEqual(["completed", "ready"]);
      const worker = await startStepWorker(own.app.engine, { databaseUrl: own.app.db.url, concurrency: 2 });
      try {
        const run = await own.waitForRun(runId, ["completed"]);
        expect(run.steps[1]!.result?.value).toBe("Ada");
      } finally {
        await worker.stop();
      }
    } finally {
      await own.close();
    }
  });
});
