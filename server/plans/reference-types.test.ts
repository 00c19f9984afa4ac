import { describe, expect, it } from "vitest";
import { builtinRegistry } from "../tools/registry";
import { validatePlan } from "./validate";

const shellThen = (args: Record<string, unknown>, tool = "write_file") => [
  { id: "step_1", tool: "shell", args: { command: "ls" }, dependsOn: [] },
  { id: "step_2", tool, args, dependsOn: ["step_1"] },
];
const validate = (steps: { id: string; tool: string; args: Record<string, unknown>; dependsOn: string[] }[]) =>
  validatePlan({ steps }, builtinRegistry);

describe("$step reference types", () => {
  it("refuses shell's whole result where write_file wants text, and says to use .stdout", () => {
    const issues = validate(shellThen({ path: "out.txt", content: "$step_1" }));
    expect(issues).toEqual([
      expect.objectContaining({ code: "reference_type_mismatch", stepId: "step_2", path: ["args", "content"] }),
    ]);
    expect(issues[0]!.message).toBe(
      "step_2: args.content: step_1's shell returns an object {exitCode, signal, stdout, stderr, truncated}, " +
        "but write_file's content takes text; use $step_1.stdout (or $step_1.stderr)",
    );
  });

  it("accepts a text field of the result", () => {
    expect(validate(shellThen({ path: "out.txt", content: "$step_1.stdout" }))).toEqual([]);
  });

  it("reports a field the producer does not declare, with the fields it has", () => {
    const issues = validate(shellThen({ path: "out.txt", content: "$step_1.output" }));
    expect(issues).toEqual([
      expect.objectContaining({ code: "invalid_reference", stepId: "step_2", path: ["args", "content"] }),
    ]);
    expect(issues[0]!.message).toContain('has no field "output"; its fields are exitCode, signal, stdout');
  });

  it("reports a field of a value that has none (read_file returns text)", () => {
    const steps = [
      { id: "step_1", tool: "read_file", args: { path: "a.txt" }, dependsOn: [] },
      { id: "step_2", tool: "write_file", args: { path: "b.txt", content: "$step_1.text" }, dependsOn: ["step_1"] },
    ];
    const issues = validate(steps);
    expect(issues).toEqual([expect.objectContaining({ code: "invalid_reference", stepId: "step_2" })]);
    expect(issues[0]!.message).toContain('is text, which has no field "text"; use $step_1');
  });

  it("refuses a text field where a number is wanted, naming both types", () => {
    const issues = validate(shellThen({ ms: "$step_1.stdout" }, "sleep"));
    expect(issues).toEqual([expect.objectContaining({ code: "reference_type_mismatch", path: ["args", "ms"] })]);
    expect(issues[0]!.message).toContain("$step_1.stdout is text, but sleep's ms takes a number");
    expect(validate(shellThen({ ms: "$step_1.exitCode" }, "sleep"))).toEqual([]);
  });

  it("stays permissive where a type is not declared: echo's output, echo's input, list indexes", () => {
    const echoFirst = [
      { id: "step_1", tool: "echo", args: { value: 1 }, dependsOn: [] },
      { id: "step_2", tool: "write_file", args: { path: "x", content: "$step_1.any.path" }, dependsOn: ["step_1"] },
    ];
    expect(validate(echoFirst)).toEqual([]);
    expect(validate(shellThen({ value: "$step_1" }, "echo"))).toEqual([]);
    const list = [
      { id: "step_1", tool: "glob", args: { pattern: "*.ts" }, dependsOn: [] },
      { id: "step_2", tool: "read_file", args: { path: "$step_1.paths.0" }, dependsOn: ["step_1"] },
    ];
    expect(validate(list)).toEqual([]);
  });

  it("knows the outputs of ask_user (text) and agent_task ({doneBy, note})", () => {
    const asked = [
      { id: "step_1", tool: "ask_user", args: { question: "Name?" }, dependsOn: [] },
      { id: "step_2", tool: "write_file", args: { path: "x", content: "$step_1" }, dependsOn: ["step_1"] },
    ];
    expect(validate(asked)).toEqual([]);
    const task = [
      { id: "step_1", tool: "agent_task", args: {}, dependsOn: [] },
      { id: "step_2", tool: "write_file", args: { path: "x", content: "$step_1" }, dependsOn: ["step_1"] },
    ];
    expect(validate(task)[0]!.message).toContain("use $step_1.note (or $step_1.doneBy)");
  });
});
