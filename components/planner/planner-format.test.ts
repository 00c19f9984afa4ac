import { describe, expect, it } from "vitest";
import { describePlanningEvent, describeRecoveryAction, formatCost } from "./planner-format";

describe("planner display", () => {
  it("describes recovery actions", () => {
    expect(describeRecoveryAction({ kind: "retry", args: { path: "a" } })).toBe("retry with new arguments");
    expect(describeRecoveryAction({ kind: "retry" })).toBe("retry as it is");
    expect(describeRecoveryAction({ kind: "abort" })).toBe("abort the run");
  });

  it("formats costs, including unknown prices", () => {
    expect(formatCost(null)).toBe("cost unknown");
    expect(formatCost(0.00123)).toBe("$0.0012");
    expect(formatCost(1.5)).toBe("$1.50");
  });

  it("turns planning events into progress lines", () => {
    expect(
      describePlanningEvent({
        seq: 4,
        type: "planning.gates_failed",
        data: { attempt: 0, details: ["Unknown tool: x"] },
      }),
    ).toEqual({ seq: 4, tone: "warn", text: "Quality gates failed; fixing:", details: ["Unknown tool: x"] });
    expect(
      describePlanningEvent({ seq: 5, type: "planning.completed", data: { planId: "plan_1", version: 2 } })?.text,
    ).toBe("Plan ready (version 2)");
    expect(describePlanningEvent({ seq: 6, type: "step.progress", data: { progress: 5 } })).toBeUndefined();
  });
});
