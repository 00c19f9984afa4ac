import { describe, expect, it } from "vitest";
import { fanOutBadge, planGraphEdges } from "./plan-graph-edges";

describe("the plan graph's branches", () => {
  const steps = [
    { id: "step_1", dependsOn: [] },
    { id: "step_2", dependsOn: ["step_1"], forEach: "$step_1.paths" },
    { id: "step_3", dependsOn: ["step_1", "step_2"], when: "$step_1.paths.length == 0" },
  ];

  it("draws a conditional step's incoming edges dashed, the first labelled with the condition in words", () => {
    const words = (id: string) => (id === "step_3" ? "the number of step_1's paths is 0" : undefined);
    expect(planGraphEdges(steps, words)).toEqual([
      { id: "step_1->step_2", source: "step_1", target: "step_2", conditional: false },
      {
        id: "step_1->step_3",
        source: "step_1",
        target: "step_3",
        conditional: true,
        label: "if the number of step_1's paths is 0",
      },
      { id: "step_2->step_3", source: "step_2", target: "step_3", conditional: true },
    ]);
  });

  it("labels with the condition as written until its words are known", () => {
    const edges = planGraphEdges(steps, () => undefined);
    expect(edges.find((edge) => edge.target === "step_3")!.label).toBe("if $step_1.paths.length == 0");
  });

  it("badges a fan-out step with the list it runs over, and no other step", () => {
    expect(fanOutBadge(steps[1]!)).toBe("× each of $step_1.paths");
    expect(fanOutBadge(steps[0]!)).toBeUndefined();
  });
});
