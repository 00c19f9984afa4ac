import { spawnSync } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { git } from "../../tests/git-fixture";
import { inspectRepositories } from "./git-repositories";

/**
 * `.git` entries that reach no repository are no reason to refuse git: git making a worktree
 * writes the checkout's `.git` file empty first, so a scan beside it (any git Stepwise starts in
 * the repository) met an empty `.git` file and refused, and agents' DONE reports failed while a
 * ready task's worktree was being made. A pointer that names a missing git directory still
 * refuses: that one leads somewhere the scan cannot check.
 */
let root: string;
beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-scan-")));
  await fs.writeFile(path.join(root, "README.md"), "# Sample\n");
  git(root, "init", "--quiet", "--initial-branch=main");
  await fs.mkdir(path.join(root, ".stepwise/worktrees/run-step_2"), { recursive: true });
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
});

const scan = () => inspectRepositories(root, { enclosing: "refuse" });
const nestedGitFile = () => path.join(root, ".stepwise/worktrees/run-step_2/.git");

describe("the repository scan and .git entries that lead nowhere", () => {
  it("is not refused by an empty .git file, which git itself refuses to follow", async () => {
    await fs.writeFile(nestedGitFile(), "");
    const answer = spawnSync("git", ["status"], { cwd: path.dirname(nestedGitFile()), encoding: "utf8" });
    expect(answer.status).not.toBe(0);
    expect(answer.stderr).toMatch(/invalid gitfile format/);
    expect((await scan()).refusal).toBeUndefined();
  });

  it("is refused by a .git file naming a git directory that does not exist", async () => {
    await fs.writeFile(nestedGitFile(), `gitdir: ${path.join(root, ".git/worktrees/missing")}\n`);
    expect((await scan()).refusal).toMatch(/run-step_2\/\.git points to a git directory that does not exist/);
  });

  it("finds a worktree's record once its .git file is written", async () => {
    git(root, "commit", "--quiet", "--allow-empty", "--message=first");
    git(root, "worktree", "add", "--quiet", "-b", "task", path.join(root, ".stepwise/worktrees/run-step_3"));
    const scanned = await scan();
    expect(scanned.refusal).toBeUndefined();
    expect(scanned.incomplete).toBeUndefined();
  });
});
