import { spawnSync } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { openApiDocument } from "../http/openapi";

/**
 * What people and agents read speaks of the product, not of the specification it was built from:
 * "seed 003 `start`" means nothing to someone running `stepwise --help`. Spec numbers stay in code
 * comments only.
 */
const SPEC_JARGON = /seed\s*\d{3}|seed's/i;
const bin = fileURLToPath(new URL("../../bin/stepwise.mjs", import.meta.url));

describe("user-facing text without spec jargon", () => {
  it("the API document (operation summaries, tags, descriptions)", () => {
    expect(JSON.stringify(openApiDocument())).not.toMatch(SPEC_JARGON);
  });

  it("`stepwise --help` and the agent verbs' help", () => {
    for (const args of [
      ["--help"],
      ["start", "--help"],
      ["status", "--help"],
      ["update", "--help"],
      ["suggest", "--help"],
    ]) {
      const help = spawnSync(process.execPath, [bin, ...args], { encoding: "utf8", cwd: path.dirname(bin) });
      expect(help.status, help.stderr).toBe(0);
      expect(help.stdout).toContain("Usage:");
      expect(help.stdout, args.join(" ")).not.toMatch(SPEC_JARGON);
    }
  });
});
