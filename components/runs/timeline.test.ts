import { describe, expect, it } from "vitest";
import { PLAN_GRAPH_SHAPE, layerDepths, layoutGraph } from "@/components/ui/graph-layout";
import { criticalPath, timelineBars, type TimedStep } from "./timeline";

const at = (second: number) => new Date(Date.UTC(2024, 0, 1, 0, 0, second)).toISOString();
const timed = (stepId: string, dependsOn: string[], start: number | null, end: number | null): TimedStep => ({
  stepId,
  dependsOn,
  startedAt: start === null ? null : at(start),
  finishedAt: end === null ? null : at(end),
});

describe("criticalPath", () => {
  it("follows the dependency that finished last back from the step that finished last", () => {
    const steps = [
      timed("a", [], 0, 1),
      timed("slow", ["a"], 1, 9),
      timed("fast", ["a"], 1, 2),
      timed("join", ["slow", "fast"], 9, 10),
      timed("side", [], 0, 3),
    ];
    expect(criticalPath(steps)).toEqual(["a", "slow", "join"]);
  });

  it("is empty before any step finished, and ignores steps that never started", () => {
    expect(criticalPath([timed("a", [], 0, null), timed("b", ["a"], null, null)])).toEqual([]);
    expect(criticalPath([timed("a", [], 0, 4), timed("b", ["a"], null, null)])).toEqual(["a"]);
  });
});

describe("timelineBars", () => {
  it("has a bar per started step in start order; running steps have no end", () => {
    const bars = timelineBars([timed("b", [], 2, null), timed("a", [], 1, 3), timed("c", [], null, null)]);
    expect(bars.map((bar) => [bar.stepId, bar.end === null])).toEqual([
      ["a", false],
      ["b", true],
    ]);
  });
});

describe("graph layout", () => {
  const chain = (n: number) =>
    Array.from({ length: n }, (_, i) => ({ id: `s${i}`, dependsOn: i ? [`s${i - 1}`] : [] }));

  it("puts each step in the column of its longest dependency chain", () => {
    const depths = layerDepths([
      { id: "a", dependsOn: [] },
      { id: "b", dependsOn: ["a"] },
      { id: "c", dependsOn: ["a", "b"] },
      { id: "d", dependsOn: [] },
    ]);
    expect(Object.fromEntries(depths)).toEqual({ a: 0, b: 1, c: 2, d: 0 });
  });

  it("places dependents to the right of their dependencies, small and large plans alike", () => {
    for (const steps of [chain(5), chain(400)]) {
      const positions = layoutGraph(steps);
      expect(positions.size).toBe(steps.length);
      for (const step of steps)
        for (const dep of step.dependsOn) expect(positions.get(step.id)!.x).toBeGreaterThan(positions.get(dep)!.x);
    }
  });

  it("places dependents below their dependencies in the plan's top-to-bottom shape", () => {
    for (const steps of [chain(5), chain(400)]) {
      const positions = layoutGraph(steps, PLAN_GRAPH_SHAPE);
      for (const step of steps)
        for (const dep of step.dependsOn) expect(positions.get(step.id)!.y).toBeGreaterThan(positions.get(dep)!.y);
    }
  });
});
