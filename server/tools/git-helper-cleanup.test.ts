import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { describe, expect, it } from "vitest";

/**
 * The helper folder git is pointed at (`stepwise-git-XXXXXX` in the temporary folder) is made once
 * per process; a process that exits must take it along, or every run of Stepwise leaves one behind.
 */
describe("git helper folder", () => {
  it("is removed when the process exits", () => {
    const module = path.join(__dirname, "git-hardening.ts");
    const script = `import(${JSON.stringify(module)}).then((m) => { const [dir] = m.gitHelperPaths(); console.log(dir); });`;
    const child = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8" });
    expect(child.status, child.stderr).toBe(0);
    const dir = child.stdout.trim().split("\n").pop()!;
    expect(path.basename(dir)).toMatch(/^stepwise-git-/);
    expect(fs.existsSync(dir)).toBe(false);
  });
});
