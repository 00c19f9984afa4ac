import { describe, expect, it } from "vitest";
import { findOverlaps, normalizeRelevantPath, overlapFixLabel, overlapMessage, pathsOverlap } from "./overlap";

const step = (id: string, relevantFilePaths: string[], dependsOn: string[] = [], skipped = false) => ({
  id,
  relevantFilePaths,
  dependsOn,
  skipped,
});

describe("overlap warnings", () => {
  it("normalises paths and compares them by whole components", () => {
    expect(normalizeRelevantPath("./src//api/")).toBe("src/api");
    expect(normalizeRelevantPath(".")).toBeUndefined();
    expect(normalizeRelevantPath("  ")).toBeUndefined();
    expect(pathsOverlap("src/api", "src/api/login.ts")).toBe(true);
    expect(pathsOverlap("src/api", "src/api")).toBe(true);
    // A shared text prefix is not a shared directory.
    expect(pathsOverlap("src/api", "src/apis/x.ts")).toBe(false);
  });

  it("warns about parallel steps touching the same directory, with the message and the fix", () => {
    const warnings = findOverlaps([
      step("step_1", ["."]),
      step("step_3", ["src/api/", "README.md"]),
      step("step_4", ["docs/guide.md"]),
      step("step_5", ["src/api/login.ts"]),
    ]);
    expect(warnings).toEqual([{ first: "step_3", second: "step_5", paths: ["src/api/"] }]);
    expect(overlapMessage(warnings[0]!)).toBe("Tasks 3 and 5 may run at the same time and both touch src/api/");
    expect(overlapFixLabel(warnings[0]!)).toBe("Add dependency 5 → 3");
  });

  it("says nothing when one step depends on the other, directly or transitively", () => {
    expect(findOverlaps([step("step_2", ["src/a.ts"]), step("step_3", ["src/a.ts"], ["step_2"])])).toEqual([]);
    expect(
      findOverlaps([
        step("step_2", ["src/a.ts"]),
        step("step_3", ["docs/x.md"], ["step_2"]),
        step("step_4", ["src/"], ["step_3"]),
      ]),
    ).toEqual([]);
  });

  it("reports the same file once, and leaves skipped steps and the whole workspace out", () => {
    expect(findOverlaps([step("a", ["x.ts", "./x.ts"]), step("b", ["x.ts"])])).toEqual([
      { first: "a", second: "b", paths: ["x.ts"] },
    ]);
    expect(overlapMessage({ first: "a", second: "b", paths: ["x.ts"] })).toBe(
      "Step a and Step b may run at the same time and both touch x.ts",
    );
    expect(findOverlaps([step("a", ["x.ts"]), step("b", ["x.ts"], [], true)])).toEqual([]);
    expect(findOverlaps([step("a", ["."]), step("b", ["src/x.ts"])])).toEqual([]);
  });

  it("still answers for plans with unknown dependencies or a cycle (refused elsewhere)", () => {
    expect(
      findOverlaps([step("a", ["src/"], ["b"]), step("b", ["src/x"], ["a"]), step("c", ["src/y"], ["zzz"])]),
    ).toEqual([{ first: "a", second: "c", paths: ["src/"] }]);
  });
});
