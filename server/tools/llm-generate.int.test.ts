import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { readPlannerConfig } from "../planner/config";
import { createPlannerDeps, installPlanner } from "../planner/deps";

let harness: Harness;
let llm: ScriptedLlm;

function configure(env: Record<string, string> = {}) {
  installPlanner(
    harness.app,
    createPlannerDeps(
      harness.app,
      readPlannerConfig({
        STEPWISE_LLM_BASE_URL: llm.baseUrl,
        STEPWISE_LLM_MODELS: "scripted-writer",
        STEPWISE_PLANNER_RETRIES: "0",
        // Long enough that only a cancellation ends a hanging call in these tests.
        STEPWISE_PLANNER_TIMEOUT_MS: "60000",
        STEPWISE_LLM_PRICES: JSON.stringify({ "scripted-writer": { input: 1, output: 2 } }),
        ...env,
      }),
    ),
  );
}

beforeAll(async () => {
  harness = await startHarness();
  llm = await startScriptedLlm();
});
afterAll(async () => {
  await llm.close();
  await harness.close();
});
beforeEach(() => {
  llm.reset();
  configure();
});

const generatePlan = {
  goal: "Write a greeting",
  steps: [
    { id: "step_1", description: "prompt", tool: "echo", args: { value: "Greet Ada" } },
    {
      id: "step_2",
      description: "write",
      tool: "llm_generate",
      args: { prompt: "$step_1", system: "Be brief.", maxOutputTokens: 50 },
      dependsOn: ["step_1"],
    },
    { id: "step_3", description: "use", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
  ],
};

async function approve(draft: unknown) {
  const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify(draft) });
  return harness.caller.plans.approve({ planId: plan.id, version: plan.version });
}

describe("llm_generate", () => {
  it("returns the model's text, passes it on, and records the call's tokens and cost against the run and step", async () => {
    llm.script({ text: "Hello, Ada!" });
    const run = await approve(generatePlan);
    const done = await harness.waitForRun(run.runId);
    expect(done.status).toBe("completed");
    const step2 = done.steps.find((step) => step.stepId === "step_2")!;
    const step3 = done.steps.find((step) => step.stepId === "step_3")!;
    expect(step2.result?.value).toBe("Hello, Ada!");
    expect(step3.result?.value).toBe("Hello, Ada!");

    // The prompt went to the provider with its reference resolved and the system message.
    const request = llm.requests[0]!;
    expect(request.model).toBe("scripted-writer");
    expect(request.messages).toEqual([
      { role: "system", content: "Be brief." },
      { role: "user", content: "Greet Ada" },
    ]);
    expect(request.max_tokens).toBe(50);

    const calls = await harness.app.db.prisma.llmCall.findMany({ where: { runId: run.runId } });
    expect(calls).toHaveLength(1);
    expect(calls[0]).toMatchObject({
      stepId: "step_2",
      purpose: "step",
      model: "compatible:scripted-writer",
      ok: true,
    });
    expect(calls[0]!.inputTokens).toBeGreaterThan(0);
    expect(calls[0]!.outputTokens).toBeGreaterThan(0);
    expect(calls[0]!.costUsd).toBeCloseTo((calls[0]!.inputTokens * 1 + calls[0]!.outputTokens * 2) / 1_000_000, 12);

    const usage = await harness.caller.planner.usage({ runId: run.runId, stepId: "step_2" });
    expect(usage.totals).toMatchObject({ calls: 1, inputTokens: calls[0]!.inputTokens });
    expect((await harness.caller.planner.usage({ runId: run.runId, stepId: "step_1" })).totals.calls).toBe(0);
  });

  it("cancelling the run aborts the model call in flight", async () => {
    llm.script({ hang: true });
    const run = await approve(generatePlan);
    for (let i = 0; llm.requests.length === 0; i++) {
      if (i > 400) throw new Error("the model was never called");
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
    await harness.caller.runs.cancel({ runId: run.runId });
    const done = await harness.waitForRun(run.runId, ["cancelled"]);
    expect(done.steps.find((step) => step.stepId === "step_2")!.status).toBe("cancelled");
    // The call ended by the abort (its timeout is a minute away) and was recorded as such.
    for (let i = 0; ; i++) {
      const call = await harness.app.db.prisma.llmCall.findFirst({ where: { runId: run.runId, stepId: "step_2" } });
      if (call) {
        expect(call.ok).toBe(false);
        expect(call.error).toMatch(/cancelled/i);
        break;
      }
      if (i > 400) throw new Error("the aborted call was never recorded");
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  });

  it("refuses a plan using it when no provider is configured, saying what to set", async () => {
    installPlanner(harness.app, createPlannerDeps(harness.app, readPlannerConfig({})));
    const error = await harness.caller.plans
      .createFromJson({ planJson: JSON.stringify(generatePlan) })
      .catch((e: unknown) => e);
    expect(error).toMatchObject({ code: "UNPROCESSABLE_CONTENT" });
    const details = (error as { cause: { details: { code: string; stepId: string; message: string }[] } }).cause
      .details;
    expect(details).toEqual([
      expect.objectContaining({
        code: "tool_unavailable",
        stepId: "step_2",
        message: expect.stringMatching(/OPENAI_API_KEY.*ANTHROPIC_API_KEY.*STEPWISE_LLM_BASE_URL/),
      }),
    ]);
  });
});
