import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { git } from "../../tests/git-fixture";
import { programsLaunched } from "../launcher/launcher";
import { sandboxAvailable } from "../tools/sandbox";
import { ensureIntegration, ensureTaskWorktree, runShort, taskWorktreeExists, workspaceRepository } from "./worktrees";

/**
 * The repository scan belongs to each git Stepwise starts in an agent workspace, not to the call
 * that asked whether the workspace is a repository: a hand-out whose worktree is in place starts
 * nothing and scans nothing, and a link leading outside the workspace, made after the workspace
 * was first asked, refuses the next git that would follow it.
 */
const runId = "5ca1ab1e-0000-4000-8000-000000000000";
let root: string;
let outside: string;
beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-scan-at-git-")));
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-scan-at-git-outside-")));
  await fs.writeFile(path.join(root, "README.md"), "# Sample\n");
  git(root, "init", "--quiet", "--initial-branch=main");
  git(root, "add", "--all");
  git(root, "commit", "--quiet", "--message=initial");
  git(outside, "init", "--quiet", "--initial-branch=main");
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});

describe("an agent workspace's repository scan", () => {
  it("requires a working sandbox on this machine (worktrees are made only in one)", () => {
    expect(sandboxAvailable()).toBe(true);
  });

  it("refuses a git once something in the workspace leads outside, though the workspace was asked before", async () => {
    const repo = await workspaceRepository(root);
    expect(repo?.root).toBe(root);
    await ensureTaskWorktree(repo!, runId, "step_2");
    // An agent plants a repository pointer leading outside, after the workspace was asked.
    await fs.mkdir(path.join(root, "vendor"));
    await fs.writeFile(path.join(root, "vendor/.git"), `gitdir: ${path.join(outside, ".git")}\n`);
    const asked = await workspaceRepository(root);
    expect(asked?.root).toBe(root);
    const refused = await ensureTaskWorktree(asked!, runId, "step_3").catch((error: unknown) => error);
    expect(refused).toMatchObject({ code: "forbidden" });
    expect((refused as Error).message).toMatch(/vendor\/\.git points to a git directory outside the workspace/);
    expect(await taskWorktreeExists(asked!, runId, "step_3")).toBe(false);
  });

  it("starts nothing for a worktree in place", async () => {
    const repo = await workspaceRepository(root);
    const worktree = await ensureTaskWorktree(repo!, runId, "step_2");
    const before = programsLaunched();
    const again = await workspaceRepository(root);
    expect(await ensureTaskWorktree(again!, runId, "step_2")).toBe(worktree);
    expect(programsLaunched()).toBe(before);
  });

  it("answers a second ask for a worktree still being checked out only once its files are there", async () => {
    // Enough files that git's checkout is still writing them when its `.git` file is already there.
    for (let dir = 0; dir < 20; dir++) {
      await fs.mkdir(path.join(root, `src/d${dir}`), { recursive: true });
      await Promise.all(
        Array.from({ length: 100 }, (_, file) =>
          fs.writeFile(path.join(root, `src/d${dir}/f${file}.txt`), `${file}\n`),
        ),
      );
    }
    git(root, "add", "--all");
    git(root, "commit", "--quiet", "--message=many files");
    const repo = (await workspaceRepository(root))!;
    await ensureIntegration(repo, runId);
    // The window is a checkout's length: a machine busy enough to miss it once gets more tries.
    let caught = 0;
    for (let task = 2; task < 7 && caught === 0; task++) {
      const worktree = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_${task}`);
      // The last file in the index's order, so the last git writes.
      const last = path.join(worktree, "src/d9/f99.txt");
      let settled = false;
      const first = ensureTaskWorktree(repo, runId, `step_${task}`).finally(() => (settled = true));
      // The first ask's git has written the worktree's `.git` file (so it looks in place)…
      while (!settled && !(await exists(path.join(worktree, ".git")))) {
        await new Promise((resolve) => setTimeout(resolve, 1));
      }
      if (settled || (await exists(last))) {
        await first;
        continue;
      }
      caught++;
      // …and a second ask (a hand-out beside the making ahead) waits for the same checkout.
      await ensureTaskWorktree(repo, runId, `step_${task}`);
      expect(await exists(last)).toBe(true);
      await first;
    }
    // Asked while a checkout was under way, or the test proved nothing.
    expect(caught).toBe(1);
  });
});

function exists(file: string): Promise<boolean> {
  return fs.access(file).then(
    () => true,
    () => false,
  );
}
