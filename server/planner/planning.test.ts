import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { LanguageModelV3CallOptions, LanguageModelV3GenerateResult } from "@ai-sdk/provider";
import { MockLanguageModelV3 } from "ai/test";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { cyclicPlanWithUnknownTool, goodPlan, goodStep } from "../../tests/planner-fixtures";
import { builtinRegistry } from "../tools/registry";
import { readPlannerConfig } from "./config";
import type { PlannerDeps } from "./deps";
import { planDeep } from "./deep-mode";
import { planWithRefinement, type PlanningContext } from "./planning";

let workspace: string;
beforeAll(async () => {
  workspace = await fs.mkdtemp(path.join(os.tmpdir(), "planner-unit-"));
  await fs.writeFile(path.join(workspace, "README.md"), "# Demo\n");
});
afterAll(() => fs.rm(workspace, { recursive: true, force: true }));

const usage = {
  inputTokens: { total: 10, noCache: 10, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 5, text: 5, reasoning: 0 },
};

function text(value: unknown): LanguageModelV3GenerateResult {
  return {
    content: [{ type: "text", text: typeof value === "string" ? value : JSON.stringify(value) }],
    finishReason: { unified: "stop", raw: "stop" },
    usage,
    warnings: [],
  };
}

function toolCall(name: string, input: unknown, id = name): LanguageModelV3GenerateResult {
  return {
    content: [{ type: "tool-call", toolCallId: `call-${id}`, toolName: name, input: JSON.stringify(input) }],
    finishReason: { unified: "tool-calls", raw: "tool_calls" },
    usage,
    warnings: [],
  };
}

/** A planning context around a mock model; records what the loop emits and every recorded call. */
function contextFor(model: MockLanguageModelV3, options: { useJudge?: boolean; answer?: string } = {}) {
  const emitted: { type: string; data?: Record<string, unknown> }[] = [];
  const calls: unknown[] = [];
  const asked: string[] = [];
  const deps = {
    prisma: { llmCall: { create: async (row: unknown) => void calls.push(row) } },
    tools: builtinRegistry,
    config: readPlannerConfig({ STEPWISE_LLM_BASE_URL: "http://127.0.0.1:9/v1", STEPWISE_LLM_MODELS: "mock" }),
    resolveModel: () => model,
  } as unknown as PlannerDeps;
  const context: PlanningContext = {
    deps,
    scope: { traceId: "trace-1" },
    goal: "Show the README",
    model: "compatible:mock",
    workspaceRoot: workspace,
    useJudge: options.useJudge ?? false,
    maxRefinements: 2,
    signal: new AbortController().signal,
    emit: async (type, data) => void emitted.push({ type, ...(data && { data }) }),
    saveDraft: async () => undefined,
    ask: async (question) => {
      asked.push(question);
      return options.answer ?? "yes";
    },
  };
  return { context, emitted, calls, asked };
}

function promptText(call: LanguageModelV3CallOptions): string {
  return JSON.stringify(call.prompt);
}

describe("draft → critique → refine", () => {
  it("sends gate failures back and accepts the refined draft", async () => {
    const model = new MockLanguageModelV3({ doGenerate: [text(cyclicPlanWithUnknownTool), text(goodPlan)] });
    const { context, emitted, calls } = contextFor(model);
    const outcome = await planWithRefinement(context, "plan it");
    expect(outcome.kind).toBe("accepted");
    expect(model.doGenerateCalls).toHaveLength(2);
    expect(model.doGenerateCalls[0]!.responseFormat).toMatchObject({ type: "json" });
    const critique = promptText(model.doGenerateCalls[1]!);
    expect(critique).toContain("Circular dependency");
    expect(critique).toContain("Unknown tool: teleport_file");
    expect(emitted.map((event) => event.type)).toEqual([
      "planning.draft",
      "planning.gates_failed",
      "planning.refining",
      "planning.draft",
      "planning.gates_passed",
    ]);
    expect(calls).toHaveLength(2);
    expect(calls[0]).toMatchObject({ data: { purpose: "draft", inputTokens: 10, outputTokens: 5, ok: true } });
    expect(calls[1]).toMatchObject({ data: { purpose: "refine" } });
  });

  it("stops after the bound and returns plan_validation_failed", async () => {
    const model = new MockLanguageModelV3({ doGenerate: () => Promise.resolve(text(cyclicPlanWithUnknownTool)) });
    const { context } = contextFor(model);
    const outcome = await planWithRefinement(context, "plan it");
    expect(model.doGenerateCalls).toHaveLength(3);
    expect(outcome).toMatchObject({
      kind: "invalid",
      failure: { status: "error", error_type: "plan_validation_failed", details: expect.any(Array) },
    });
  });

  it("feeds the judge's feedback back and accepts what the judge approves", async () => {
    const model = new MockLanguageModelV3({
      doGenerate: [
        text(goodPlan),
        text({ is_approved: false, feedback: "Split step_2." }),
        text(goodPlan),
        text({ is_approved: true, feedback: "ok" }),
      ],
    });
    const { context, emitted } = contextFor(model, { useJudge: true });
    const outcome = await planWithRefinement(context, "plan it");
    expect(outcome.kind).toBe("accepted");
    expect(promptText(model.doGenerateCalls[2]!)).toContain("Split step_2.");
    expect(emitted.filter((event) => event.type === "planning.judge").map((event) => event.data?.approved)).toEqual([
      false,
      true,
    ]);
  });

  it("asks again after unparsable output", async () => {
    const model = new MockLanguageModelV3({ doGenerate: [text("I cannot do JSON today"), text(goodPlan)] });
    const { context, emitted } = contextFor(model);
    expect((await planWithRefinement(context, "plan it")).kind).toBe("accepted");
    expect(emitted[0]!.type).toBe("planning.unparsable");
    expect(promptText(model.doGenerateCalls[1]!)).toContain("could not be read as the plan JSON");
  });
});

describe("deep mode", () => {
  it("offers only read-only tools, ask_user and submit_plan, and finishes on an accepted submission", async () => {
    const model = new MockLanguageModelV3({
      doGenerate: [
        toolCall("read_file", { path: "README.md" }),
        toolCall("ask_user", { question: "Echo too?" }),
        toolCall("submit_plan", { ...goodPlan, steps: [goodStep("step_1")] }),
      ],
    });
    const { context, asked } = contextFor(model, { answer: "No" });
    const outcome = await planDeep(context, async () => "investigate");
    expect(outcome.kind).toBe("accepted");
    const offered = (model.doGenerateCalls[0]!.tools ?? []).map((tool) => tool.name).sort();
    expect(offered).toEqual(expect.arrayContaining(["ask_user", "list_dir", "read_file", "submit_plan"]));
    expect(offered).not.toEqual(expect.arrayContaining(["write_file"]));
    expect(offered).not.toContain("echo");
    expect(asked).toEqual(["Echo too?"]);
    expect(promptText(model.doGenerateCalls[1]!)).toContain("# Demo"); // read_file's result
    expect(promptText(model.doGenerateCalls[2]!)).toContain('"answer":"No"');
  });
});
