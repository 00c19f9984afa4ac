import { describe, expect, it } from "vitest";
import { assessStep } from "./assessment";
import { builtinRegistry } from "./registry";
import { sandboxAvailable } from "./sandbox";

describe("assessStep: risk and capability from the tool and the command, never the author", () => {
  it("judges a destructive shell command high risk, with the analysis' reason", () => {
    const rm = assessStep(builtinRegistry, "shell", { command: "rm -rf build" });
    expect(rm).toMatchObject({ risk: "high", capability: "shell.exec", capabilityLabel: "Run shell commands" });
    expect(rm.reason).toBeTruthy();
  });

  it("judges a read-only command low risk only where the sandbox holds it to that", () => {
    expect(assessStep(builtinRegistry, "shell", { command: "ls -la" })).toMatchObject(
      sandboxAvailable()
        ? { risk: "low", capabilityLabel: "Run read-only commands" }
        : { risk: "high", capabilityLabel: "Run shell commands" },
    );
  });

  it("judges an unknown command (an unresolved reference, a missing argument) as the worst case", () => {
    expect(assessStep(builtinRegistry, "shell", { command: 42 })).toMatchObject({ risk: "high" });
    expect(assessStep(builtinRegistry, "shell", {})).toMatchObject({ risk: "high" });
    expect(assessStep(builtinRegistry, "no_such_tool", {})).toMatchObject({ risk: "high", capability: "unknown" });
  });

  it("takes other tools' risk and label from their metadata", () => {
    expect(assessStep(builtinRegistry, "read_file", { path: "a" })).toMatchObject({
      risk: "low",
      capabilityLabel: "Read files",
    });
    expect(assessStep(builtinRegistry, "delete_path", { path: "a" })).toMatchObject({
      risk: "high",
      capabilityLabel: "Delete files",
    });
  });
});
