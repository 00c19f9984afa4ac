import { describe, expect, it } from "vitest";
import { canonicalJson, stepDefinitionHash, waiverDefinitionHash } from "./definition-hash";

const step = {
  tool: "shell",
  args: { command: "rm -rf build", cwd: ".", env: { A: "1", B: "2" } },
  timeoutSeconds: 300,
  retry: { maxAttempts: 3, backoffMs: 500 },
  dependsOn: ["step_1", "step_2"],
};
const WORKSPACE = "/srv/project";

describe("stepDefinitionHash", () => {
  it("is canonical: the order keys were written in does not matter, at any depth", () => {
    const reordered = {
      dependsOn: ["step_2", "step_1"],
      retry: { backoffMs: 500, maxAttempts: 3 },
      timeoutSeconds: 300,
      args: { env: { B: "2", A: "1" }, cwd: ".", command: "rm -rf build" },
      tool: "shell",
    };
    expect(stepDefinitionHash(reordered, WORKSPACE)).toBe(stepDefinitionHash(step, WORKSPACE));
    expect(stepDefinitionHash(step, WORKSPACE)).toMatch(/^[0-9a-f]{64}$/);
  });

  it("changes with any change to what runs", () => {
    const base = stepDefinitionHash(step, WORKSPACE);
    const variants = [
      { ...step, tool: "write_file" },
      { ...step, args: { ...step.args, command: "rm -rf build " } },
      { ...step, args: { ...step.args, command: "rm -rf /" } },
      { ...step, args: { ...step.args, cwd: "sub" } },
      { ...step, args: { ...step.args, env: { A: "1", B: "3" } } },
      { ...step, args: { ...step.args, extra: null } },
      { ...step, args: { ...step.args, command: ["rm", "-rf", "build"] } },
      { ...step, timeoutSeconds: 301 },
      { ...step, retry: { maxAttempts: 4, backoffMs: 500 } },
      { ...step, retry: { maxAttempts: 3, backoffMs: 0 } },
      { ...step, dependsOn: ["step_1"] },
    ];
    const hashes = variants.map((variant) => stepDefinitionHash(variant, WORKSPACE));
    for (const hash of hashes) expect(hash).not.toBe(base);
    expect(new Set(hashes).size).toBe(hashes.length);
    expect(stepDefinitionHash(step, "/srv/other")).not.toBe(base);
  });

  it("hashes arguments as written, before `$step` resolution", () => {
    const referencing = { ...step, args: { command: "$step_1.stdout" } };
    const literal = { ...step, args: { command: "rm -rf build" } };
    expect(stepDefinitionHash(referencing, WORKSPACE)).not.toBe(stepDefinitionHash(literal, WORKSPACE));
  });

  it("keeps array order, which is meaningful, and tells types apart", () => {
    expect(canonicalJson({ b: [2, 1], a: "1" })).toBe('{"a":"1","b":[2,1]}');
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: "1" }));
    expect(canonicalJson({ a: undefined, b: null })).toBe('{"b":null}');
  });

  it("binds a waiver to the definition without a workspace", () => {
    expect(waiverDefinitionHash(step)).toBe(stepDefinitionHash(step, ""));
    expect(waiverDefinitionHash({ ...step, args: { command: "ls" } })).not.toBe(waiverDefinitionHash(step));
  });
});
