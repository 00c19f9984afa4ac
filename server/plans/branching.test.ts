import { describe, expect, it } from "vitest";
import { builtinRegistry } from "../tools/registry";
import type { PlanIssue, Step } from "../plan-schema";
import { conditionInWords, evaluateCondition, parseCondition, type ConditionStepState } from "./conditions";
import { validatePlan } from "./validate";

type S = Pick<Step, "id" | "tool" | "args" | "dependsOn" | "when" | "forEach">;
const validate = (steps: S[]) => validatePlan({ steps }, builtinRegistry);
const only = (issues: PlanIssue[], code: PlanIssue["code"]) => issues.filter((issue) => issue.code === code);

const shell: S = { id: "step_1", tool: "shell", args: { command: "npm test", allowFailure: true }, dependsOn: [] };
const glob: S = { id: "step_2", tool: "glob", args: { pattern: "**/*.ts" }, dependsOn: [] };

describe("condition grammar", () => {
  it("parses comparisons, &&, ||, !, parentheses and .length", () => {
    const condition = parseCondition(
      `!($step_1.exitCode == 0) && ($step_2.paths.length > 0 || $step_1.status == "failed")`,
    );
    expect(conditionInWords(`$step_2.paths.length > 0`)).toBe("the number of step_2's paths is more than 0");
    const state = (status: string, output?: unknown) => ({ status, output }) satisfies ConditionStepState;
    const states = new Map([
      ["step_1", state("completed", { exitCode: 1 })],
      ["step_2", state("completed", { paths: ["a.ts"] })],
    ]);
    expect(evaluateCondition(condition, (id) => states.get(id))).toEqual({ ok: true, value: true });
    states.set("step_2", state("completed", { paths: [] }));
    expect(evaluateCondition(condition, (id) => states.get(id))).toEqual({ ok: true, value: false });
  });

  it("refuses anything that is not the grammar, with the position", () => {
    for (const bad of [
      "step_1 == 0",
      "$step_1.exitCode = 0",
      "$step_1.exitCode == 0 &&",
      "process.exit(1)",
      '$step_1.stdout == "unterminated',
      "($step_1.exitCode == 0",
      "1 == 1",
    ]) {
      expect(() => parseCondition(bad), bad).toThrow();
    }
  });

  it("reads .status of any step but other fields only of a completed one", () => {
    const condition = parseCondition(`$step_1.exitCode != 0`);
    expect(evaluateCondition(condition, () => ({ status: "failed" }))).toEqual({
      ok: false,
      reason: "step_1 did not complete (failed)",
    });
    expect(evaluateCondition(parseCondition(`$step_1.status == "skipped"`), () => ({ status: "skipped" }))).toEqual({
      ok: true,
      value: true,
    });
  });

  it("never reaches the prototype of an output", () => {
    const result = evaluateCondition(parseCondition("$step_1.constructor"), () => ({
      status: "completed",
      output: {},
    }));
    expect(result.ok).toBe(false);
  });
});

describe("plan validation of when and forEach", () => {
  it("accepts a condition on declared fields and a fan-out over a declared list", () => {
    const issues = validate([
      shell,
      glob,
      { id: "step_3", tool: "echo", args: { value: "fix" }, dependsOn: [], when: "$step_1.exitCode != 0" },
      { id: "step_4", tool: "echo", args: { value: "$item" }, dependsOn: ["step_2"], forEach: "$step_2.paths" },
      { id: "step_5", tool: "echo", args: { value: "x" }, dependsOn: [], when: '$step_1.status == "failed"' },
    ]);
    expect(issues).toEqual([]);
  });

  it("names the step and the fields there are for an unknown field", () => {
    const issues = validate([
      shell,
      { id: "step_3", tool: "echo", args: {}, dependsOn: [], when: "$step_1.exit != 0" },
    ]);
    expect(only(issues, "invalid_condition")).toEqual([
      expect.objectContaining({
        stepId: "step_3",
        path: ["when"],
        message: expect.stringMatching(/^step_3: when: \$step_1\.exit: .*no field "exit".*exitCode/),
      }),
    ]);
  });

  it("refuses a syntax error, an unknown step, the step itself, a later step and an impossible comparison", () => {
    const issues = validate([
      shell,
      { id: "step_3", tool: "echo", args: {}, dependsOn: [], when: "$step_1.exitCode ==" },
      { id: "step_4", tool: "echo", args: {}, dependsOn: [], when: "$step_99.exitCode == 0" },
      { id: "step_5", tool: "echo", args: {}, dependsOn: [], when: "$step_5.status == 'completed'" },
      { id: "step_6", tool: "echo", args: {}, dependsOn: [], when: "$step_7.status == 'completed'" },
      { id: "step_7", tool: "echo", args: {}, dependsOn: ["step_6"] },
      { id: "step_8", tool: "echo", args: {}, dependsOn: [], when: '$step_1.exitCode == "0"' },
      { id: "step_9", tool: "echo", args: {}, dependsOn: [], when: '$step_1.status == "done"' },
      { id: "step_10", tool: "echo", args: {}, dependsOn: [], when: "$step_1.exitCode.length > 0" },
    ]);
    expect(only(issues, "invalid_condition").map((issue) => issue.stepId)).toEqual([
      "step_3",
      "step_4",
      "step_5",
      "step_6",
      "step_8",
      "step_9",
      "step_10",
    ]);
  });

  it("refuses a fan-out over a step it does not depend on, an unknown field or a value that is not a list", () => {
    const issues = validate([
      shell,
      glob,
      { id: "step_3", tool: "echo", args: { value: "$item" }, dependsOn: [], forEach: "$step_2.paths" },
      { id: "step_4", tool: "echo", args: { value: "$item" }, dependsOn: ["step_2"], forEach: "$step_2.files" },
      { id: "step_5", tool: "echo", args: { value: "$item" }, dependsOn: ["step_1"], forEach: "$step_1.stdout" },
    ]);
    expect(only(issues, "invalid_for_each").map((issue) => [issue.stepId, issue.message])).toEqual([
      ["step_3", expect.stringContaining("not one of its dependencies")],
      ["step_4", expect.stringContaining('no field "files"')],
      ["step_5", expect.stringContaining("not a list")],
    ]);
  });

  it("types a fan-out step's output as the list of its instances' outputs", () => {
    const each: S = {
      id: "step_3",
      tool: "shell",
      args: { command: "$item" },
      dependsOn: ["step_2"],
      forEach: "$step_2.paths",
    };
    const reads = (when: string): S => ({ id: "step_4", tool: "echo", args: {}, dependsOn: ["step_3"], when });
    expect(only(validate([glob, each, reads("$step_3.length > 0")]), "invalid_condition")).toEqual([]);
    expect(only(validate([glob, each, reads("$step_3.exitCode != 0")]), "invalid_condition")).toHaveLength(1);
    const write: S = {
      id: "step_4",
      tool: "write_file",
      args: { path: "out.txt", content: "$step_3" },
      dependsOn: ["step_3"],
    };
    expect(only(validate([glob, each, write]), "reference_type_mismatch")[0]?.message).toContain("a list");
  });

  it("lets $item stand for an argument of any type only in a fan-out step", () => {
    const sleep = (forEach?: string): S => ({
      id: "step_3",
      tool: "sleep",
      args: { ms: "$item" },
      dependsOn: ["step_2"],
      ...(forEach && { forEach }),
    });
    expect(only(validate([glob, sleep("$step_2.paths")]), "invalid_args")).toEqual([]);
    expect(only(validate([glob, sleep()]), "invalid_args")).toHaveLength(1);
  });
});

describe("Markdown export of when and forEach", () => {
  it("says the condition in words and the fan-out with its bound", async () => {
    const { exportPlanMarkdown } = await import("./export");
    const { checkPlanDraft } = await import("./validate");
    const checked = checkPlanDraft(
      {
        goal: "branch",
        steps: [
          shell,
          { id: "step_2", tool: "glob", args: { pattern: "*.ts" } },
          { id: "step_3", tool: "echo", args: { value: "fix" }, when: "$step_1.exitCode != 0" },
          {
            id: "step_4",
            tool: "echo",
            args: { value: "$item" },
            dependsOn: ["step_2"],
            forEach: "$step_2.paths",
            maxItems: 20,
          },
        ],
      },
      builtinRegistry,
    );
    expect(checked.issues).toEqual([]);
    const plan = {
      ...checked.plan!,
      id: "p1",
      taskId: "t1",
      version: 1,
      source: "manual" as const,
      traceId: "t",
      author: "a",
      createdAt: new Date(0).toISOString(),
    };
    const { content } = exportPlanMarkdown(plan);
    expect(content).toContain("- Runs only if step_1's exitCode is not 0 (`$step_1.exitCode != 0`)");
    expect(content).toContain("- Runs once for each element of `$step_2.paths` (`$item` in its arguments), at most 20");
  });
});
