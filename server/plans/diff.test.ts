import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { builtinRegistry } from "../tools/registry";
import { diffPlans, longestIncreasingRun } from "./diff";
import type { PlanContent } from "../plan-schema";
import { checkPlanDraft } from "./validate";

function plan(draft: unknown): PlanContent {
  const checked = checkPlanDraft(draft, builtinRegistry);
  if (!checked.plan) throw new Error(JSON.stringify(checked.issues));
  return checked.plan;
}

const base = plan({
  goal: "Ship it",
  successCriteria: ["tests pass"],
  steps: [
    { id: "step_1", description: "read", tool: "read_file", args: { path: "a.txt" } },
    { id: "step_2", description: "wait", tool: "sleep", args: { ms: 10 } },
    { id: "step_3", description: "echo", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    { id: "step_4", description: "done", tool: "echo", args: { value: "x" }, dependsOn: ["step_3"] },
  ],
});

describe("diffPlans", () => {
  it("reports nothing between a version and itself", () => {
    expect(diffPlans(base, base)).toEqual({ plan: [], added: [], removed: [], moved: [], changed: [] });
  });

  it("reports added and removed steps without calling the shifted ones moved", () => {
    const next = plan({
      ...base,
      steps: [
        base.steps[0],
        { id: "step_5", description: "new", tool: "echo", args: { value: 1 } },
        base.steps[2],
        base.steps[3],
      ],
    });
    const diff = diffPlans(base, next);
    expect(diff.added).toEqual([{ id: "step_5", title: "new", tool: "echo", position: 2 }]);
    expect(diff.removed).toEqual([{ id: "step_2", title: "wait", tool: "sleep", position: 2 }]);
    expect(diff.moved).toEqual([]);
    expect(diff.changed).toEqual([]);
  });

  it("reports a moved step with its old and new position", () => {
    const next = plan({ ...base, steps: [base.steps[1], base.steps[0], base.steps[2], base.steps[3]] });
    const diff = diffPlans(base, next);
    expect(diff.moved).toHaveLength(1);
    expect(["step_1", "step_2"]).toContain(diff.moved[0]!.id);
    expect(
      diffPlans(base, plan({ ...base, steps: [base.steps[0], base.steps[2], base.steps[3], base.steps[1]] })).moved,
    ).toEqual([{ id: "step_2", title: "wait", from: 2, to: 4 }]);
  });

  it("reports field-level changes with old and new values, args by key", () => {
    const next = plan({
      ...base,
      goal: "Ship it today",
      successCriteria: ["tests pass", "docs updated"],
      steps: [
        { ...base.steps[0], args: { path: "b.txt" }, description: "read b" },
        { ...base.steps[1], retry: { maxAttempts: 5, backoffMs: 500 }, skipped: true, title: "Pause" },
        base.steps[2],
        { ...base.steps[3], dependsOn: ["step_3", "step_2"], risk: "high" },
      ],
    });
    const diff = diffPlans(base, next);
    expect(diff.plan).toEqual([
      { field: "goal", before: "Ship it", after: "Ship it today" },
      { field: "successCriteria", before: ["tests pass"], after: ["tests pass", "docs updated"] },
    ]);
    expect(diff.changed).toEqual([
      {
        id: "step_1",
        title: "read b",
        changes: [
          { field: "description", before: "read", after: "read b" },
          { field: "args.path", before: "a.txt", after: "b.txt" },
        ],
      },
      {
        id: "step_2",
        title: "Pause",
        changes: [
          { field: "retry.maxAttempts", before: 3, after: 5 },
          { field: "skipped", before: false, after: true },
          { field: "title", before: undefined, after: "Pause" },
        ],
      },
      {
        id: "step_4",
        title: "done",
        changes: [
          { field: "dependsOn", before: ["step_3"], after: ["step_3", "step_2"] },
          { field: "risk", before: "low", after: "high" },
        ],
      },
    ]);
  });
});

describe("longestIncreasingRun", () => {
  it("finds a longest strictly increasing subsequence", () => {
    fc.assert(
      fc.property(fc.uniqueArray(fc.nat(50), { maxLength: 12 }), (values) => {
        const run = [...longestIncreasingRun(values)].sort((a, b) => a - b);
        for (let i = 1; i < run.length; i++) expect(values[run[i]!]!).toBeGreaterThan(values[run[i - 1]!]!);
        // Brute force the true length over every subset (at most 2^12).
        let best = 0;
        for (let mask = 0; mask < 1 << values.length; mask++) {
          const picked = values.filter((_, i) => mask & (1 << i));
          if (picked.every((v, i) => i === 0 || v > picked[i - 1]!)) best = Math.max(best, picked.length);
        }
        expect(run.length).toBe(best);
      }),
      { numRuns: 200 },
    );
  });
});
