import { describe, expect, it } from "vitest";
import { NEEDS_APPROVAL, READ_ONLY } from "./shell-corpus";
import { analyzeShellCommand } from "./shell-read-only";

/**
 * The read-only analysis against a corpus: every category of attack the analysis must catch
 * (each needs approval), and the ordinary reading commands it must let through. The sandbox
 * enforces "read-only" regardless; this corpus keeps the decision of what to ask about exact.
 */

describe("shell corpus", () => {
  const total = READ_ONLY.length + Object.values(NEEDS_APPROVAL).flat().length;
  it(`holds at least 300 commands (${total})`, () => {
    expect(total).toBeGreaterThanOrEqual(300);
  });

  it.each(READ_ONLY)("%j is read-only", (command) => {
    expect(analyzeShellCommand(command)).toEqual({ readOnly: true });
  });

  for (const [category, commands] of Object.entries(NEEDS_APPROVAL)) {
    it.each(commands)(`${category}: %j needs approval`, (command) => {
      expect(analyzeShellCommand(command).readOnly).toBe(false);
    });
  }
});
