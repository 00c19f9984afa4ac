import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { git } from "../../tests/git-fixture";
import { inspectRepositories } from "./git-repositories";
import { programsLaunched } from "../launcher/launcher";
import { sandboxAvailable } from "./sandbox";

/**
 * The repository scan keeps what `git config --list` answered (git-config-cache.ts) only while the
 * files git read are as they were: counted in programs started, and checked on the overrides a
 * git program would get. Needs the sandbox (the configuration is read only inside it).
 */
let root: string;
beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-config-cache-")));
  await fs.writeFile(path.join(root, "a.txt"), "a\n");
  git(root, "init", "--quiet", "--initial-branch=main");
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

/** Past the racy margin of the configuration's last change (two seconds). */
async function settled(file: string): Promise<void> {
  const { ctimeMs, mtimeMs } = await fs.stat(file);
  const wait = Math.max(ctimeMs, mtimeMs) + 2_100 - Date.now();
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

async function scan(): Promise<{ overrides: Map<string, string>; programs: number }> {
  const before = programsLaunched();
  const result = await inspectRepositories(root, { enclosing: "refuse" });
  return { overrides: new Map(result.overrides), programs: programsLaunched() - before };
}

describe.runIf(sandboxAvailable())("the repository configuration kept between scans", () => {
  it("is read once while unchanged, and again as soon as it changes", async () => {
    const config = path.join(root, ".git/config");
    await settled(config);
    expect((await scan()).programs).toBe(1);
    expect((await scan()).programs).toBe(0);

    // Appended to in place: seen at once.
    await fs.appendFile(config, '[filter "x"]\n\tclean = touch pwned\n');
    const changed = await scan();
    expect(changed.programs).toBe(1);
    expect(changed.overrides.get("filter.x.clean")).toBe("");

    // Replaced by another file (a rename), then settled: read again, then kept.
    await fs.writeFile(`${config}.new`, '[filter "y"]\n\tsmudge = touch pwned\n');
    await fs.rename(`${config}.new`, config);
    await settled(config);
    const replaced = await scan();
    expect(replaced.programs).toBe(1);
    expect(replaced.overrides.get("filter.y.smudge")).toBe("");
    expect(replaced.overrides.has("filter.x.clean")).toBe(false);
    expect((await scan()).programs).toBe(0);
  });

  it("is never kept while it includes other files, or while it changed within the racy margin", async () => {
    const config = path.join(root, ".git/config");
    await fs.appendFile(config, "[include]\n\tpath = extra.config\n");
    await fs.writeFile(path.join(root, ".git/extra.config"), '[filter "z"]\n\tclean = touch pwned\n');
    await settled(config);
    expect((await scan()).overrides.get("filter.z.clean")).toBe("");
    // The included file changes; the including one does not: read again every time.
    await fs.writeFile(path.join(root, ".git/extra.config"), '[diff "w"]\n\ttextconv = touch pwned\n');
    const again = await scan();
    expect(again.programs).toBe(1);
    expect(again.overrides.get("diff.w.textconv")).toBe("cat");
    expect(again.overrides.has("filter.z.clean")).toBe(false);

    // Just written: not kept, so a second change within the same clock tick cannot go unseen.
    await fs.writeFile(config, "[core]\n\tbare = false\n");
    expect((await scan()).programs).toBe(1);
    expect((await scan()).programs).toBe(1);
  });
});
