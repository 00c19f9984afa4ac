import { describe, expect, it } from "vitest";
import { matchStepIdentities, wordSimilarity } from "./step-identity";

const step = (id: string, description: string, tool = "agent_task", args: Record<string, unknown> = {}) => ({
  id,
  description,
  tool,
  args,
});

describe("matchStepIdentities", () => {
  const base = [
    step("step_1", "Read the argument parser"),
    step("step_2", "Add the verbose flag to the parser"),
    step("step_3", "Document the flag in the README"),
  ];

  it("gives an unchanged step its old id wherever it now stands", () => {
    const drafted = [step("d1", "Document the flag in the README"), step("d2", "Read the argument parser")];
    expect(Object.fromEntries(matchStepIdentities(base, drafted))).toEqual({ d1: "step_3", d2: "step_1" });
  });

  it("keeps the id of a step whose wording changed a little, and gives a new step none", () => {
    const drafted = [
      step("d1", "Read the argument parser"),
      step("d2", "Add the loud flag to the parser"),
      step("d3", "Run the whole test suite"),
      step("d4", "Document the flag in the README"),
    ];
    expect(Object.fromEntries(matchStepIdentities(base, drafted))).toEqual({
      d1: "step_1",
      d2: "step_2",
      d4: "step_3",
    });
  });

  it("never matches across tools or hands one base step to two drafted steps", () => {
    const drafted = [
      step("d1", "Read the argument parser", "read_file"),
      step("d2", "Read the argument parser"),
      step("d3", "Read the argument parser"),
    ];
    expect(Object.fromEntries(matchStepIdentities(base, drafted))).toEqual({ d2: "step_1" });
  });

  it("leaves steps that name a base id to that id", () => {
    const drafted = [step("step_2", "Read the argument parser"), step("d2", "Read the argument parser")];
    expect(Object.fromEntries(matchStepIdentities(base, drafted))).toEqual({ d2: "step_1" });
  });

  it("measures shared words, not characters", () => {
    expect(wordSimilarity("Add the flag", "add THE flag")).toBe(1);
    expect(wordSimilarity("Add the flag", "Remove a test")).toBe(0);
  });
});
