import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { git } from "../../tests/git-fixture";
import { runVerifiers } from "../agents/verifiers";
import {
  ensureTaskWorktree,
  integrationBranch,
  removeRunWorktrees,
  removeTaskWorktree,
  worktreeRelativePath,
  workspaceRepository,
} from "../agents/worktrees";
import { commitPendingWork, mergeTaskBranch } from "../agents/worktree-merges";
import type { Step } from "../plan-schema";
import { gitCommitTool } from "./git-commit";
import { gitDiffTool } from "./git-diff";
import { gitLogTool } from "./git-log";
import { gitStatusTool } from "./git-status";
import { sandboxAvailable } from "./sandbox";
import { readOnlyShellTool, shellTool } from "./shell";
import { createToolContext, runTool } from "./tool-test-support";

/**
 * The attack of the issue "Authority as one policy", item 3: an agent that can write the
 * workspace puts `include.path` to a file outside the workspace into `.git/config`; that file
 * names a clean and a smudge filter (with `.gitattributes` `* filter=x`), textconv and diff
 * commands, a merge driver, an fsmonitor, a hooks directory, pagers and an editor — each a program
 * that writes a marker outside the workspace. Reading the configuration inside the sandbox does not
 * see the included file, so its drivers were not disarmed, and committing ran git unconfined: the
 * filter ran as root. Every git path Stepwise has — the git tools, git_commit "commit all", the
 * agent worktree's add/commit/merge/remove, verifiers and shell git — runs here, works, and no
 * marker is ever written: git runs only through the launcher, in the sandbox, where the included
 * file is not there.
 */

let base: string;
let outside: string;
let workspace: string;

async function markers(): Promise<string[]> {
  return (await fs.readdir(outside)).filter((name) => name.startsWith("pwned-")).sort();
}

/** A program that records that it ran (as a marker outside the workspace) and passes stdin through. */
async function markerProgram(name: string): Promise<string> {
  const file = path.join(outside, name);
  await fs.writeFile(file, `#!/bin/sh\necho "$(id -u) $*" >> '${outside}/pwned-${name}'\ncat\nexit 0\n`, {
    mode: 0o755,
  });
  return file;
}

/** The included configuration, outside the workspace: every program git may run, each a marker. */
async function plantOutsideConfig(): Promise<string> {
  const hooks = path.join(outside, "hooks");
  await fs.mkdir(hooks, { recursive: true });
  for (const hook of [
    "pre-commit",
    "prepare-commit-msg",
    "commit-msg",
    "post-commit",
    "post-checkout",
    "post-merge",
    "pre-merge-commit",
    "reference-transaction",
    "post-index-change",
  ]) {
    await fs.writeFile(path.join(hooks, hook), `#!/bin/sh\necho "$(id -u)" >> '${outside}/pwned-hook-${hook}'\n`, {
      mode: 0o755,
    });
  }
  const config = [
    `[filter "x"]`,
    `\tclean = ${await markerProgram("clean")}`,
    `\tsmudge = ${await markerProgram("smudge")}`,
    `[diff "x"]`,
    `\ttextconv = ${await markerProgram("textconv")}`,
    `\tcommand = ${await markerProgram("diffcommand")}`,
    `[merge "x"]`,
    `\tdriver = ${await markerProgram("mergedriver")} %O %A %B`,
    `[diff]`,
    `\texternal = ${await markerProgram("external")}`,
    `[core]`,
    `\tfsmonitor = ${await markerProgram("fsmonitor")}`,
    `\thooksPath = ${hooks}`,
    `\tpager = ${await markerProgram("pager")}`,
    `\teditor = ${await markerProgram("editor")}`,
    `\tsshCommand = ${await markerProgram("ssh")}`,
    `[pager]`,
    `\tlog = ${await markerProgram("pagerlog")}`,
    `\tdiff = ${await markerProgram("pagerdiff")}`,
    `[credential]`,
    `\thelper = !${await markerProgram("credential")}`,
    `[alias]`,
    `\tst = !${await markerProgram("alias")}`,
    "",
  ].join("\n");
  const file = path.join(outside, "evil.gitconfig");
  await fs.writeFile(file, config);
  return file;
}

beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-git-outside-")));
  outside = path.join(base, "outside");
  await fs.mkdir(outside);
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

beforeEach(async () => {
  for (const marker of await markers()) await fs.rm(path.join(outside, marker));
  workspace = await fs.mkdtemp(path.join(base, "ws-"));
  await fs.writeFile(path.join(workspace, "a.txt"), "a\n");
  await fs.writeFile(path.join(workspace, "b.txt"), "b\n");
  await fs.writeFile(path.join(workspace, ".gitattributes"), "* filter=x diff=x merge=x\n");
  git(workspace, "init", "--quiet", "--initial-branch=main");
  git(workspace, "add", "--all");
  git(workspace, "commit", "--quiet", "--message=initial");
  // What the agent writes: only `.git/config` is touched, as any workspace write could.
  const included = await plantOutsideConfig();
  await fs.appendFile(path.join(workspace, ".git/config"), `[include]\n\tpath = ${included}\n`);
  // Sanity: git run unconfined really does run the included filter — the attack is live.
  git(workspace, "hash-object", "a.txt");
  expect(await markers()).toEqual(["pwned-clean"]);
  await fs.rm(path.join(outside, "pwned-clean"));
});

/** Takes the include out again, so the test's own (unconfined) git can look at the results. */
async function disarmForInspection(): Promise<void> {
  const config = path.join(workspace, ".git/config");
  const text = await fs.readFile(config, "utf8");
  await fs.writeFile(config, text.replace(/\[include\]\n\tpath = .*\n/, ""));
}

describe("a repository whose configuration includes programs from outside the workspace", () => {
  it("requires a working sandbox on this machine (the rest relies on it)", () => {
    expect(sandboxAvailable()).toBe(true);
  });

  it("reads status, diff and log, and commits all through git_commit, without running any of them", async () => {
    await fs.writeFile(path.join(workspace, "a.txt"), "a changed\n");
    await fs.writeFile(path.join(workspace, "new.txt"), "new\n");
    const context = createToolContext(workspace);
    const status = await runTool(gitStatusTool, {}, context);
    expect(JSON.stringify(status)).toContain("new.txt");
    const diff = await runTool(gitDiffTool, {}, context);
    expect(JSON.stringify(diff)).toContain("a changed");
    const log = await runTool(gitLogTool, {}, context);
    expect(JSON.stringify(log)).toContain("initial");
    // A person approved "commit all": that is not approving the repository's filter.
    const committed = await runTool(
      gitCommitTool,
      { message: "Commit all", all: true },
      { ...createToolContext(workspace), approvedByPerson: true },
    );
    expect(committed.files).toEqual(expect.arrayContaining(["a.txt", "new.txt"]));
    expect(await markers()).toEqual([]);
    const shell = await runTool(
      shellTool,
      { command: "git log -p -1 && git diff HEAD~1", allowFailure: true },
      context,
    );
    expect(shell.stdout).toContain("a changed");
    const planning = await runTool(readOnlyShellTool, { command: "git status && git log -p" }, context);
    expect(planning.exitCode).toBe(0);
    expect(await markers()).toEqual([]);
    await disarmForInspection();
    expect(git(workspace, "show", "HEAD:a.txt")).toBe("a changed\n");
    expect(git(workspace, "status", "--porcelain")).toBe("");
  });

  it("adds a task's worktree, commits it on DONE, verifies, merges and removes it without running any of them", async () => {
    const runId = "0badc0de-0000-4000-8000-000000000000";
    const repo = await workspaceRepository(workspace);
    expect(repo).toBeDefined();
    const worktree = await ensureTaskWorktree(repo!, runId, "step_2");
    expect(worktree).toBe(path.join(repo!.root, worktreeRelativePath(runId, "step_2")));
    expect(await fs.readFile(path.join(worktree, "a.txt"), "utf8")).toBe("a\n");
    await fs.writeFile(path.join(worktree, "a.txt"), "a from the task\n");
    await fs.writeFile(path.join(worktree, "task.txt"), "added by the task\n");
    // What an agent's DONE does: commit the worktree (`git add --all`), verify, merge, remove.
    expect(await commitPendingWork(repo!, runId, "step_2", "Task 2", "agent-7")).toBe(true);
    expect(await markers()).toEqual([]);
    const step = {
      id: "step_2",
      tool: "agent_task",
      args: { title: "t", verify: ["git status --porcelain", "git diff HEAD~1 -- a.txt"] },
    } as unknown as Step;
    const verified = await runVerifiers({ step, runId, cwd: worktree, attempt: 1, approvedByPerson: false });
    expect(verified.results.map((result) => [result.command, result.passed, result.error])).toEqual([
      ["git status --porcelain", true, undefined],
      ["git diff HEAD~1 -- a.txt", true, undefined],
    ]);
    const merged = await mergeTaskBranch(repo!, runId, "step_2", "Merge task 2");
    expect(merged.kind).toBe("merged");
    await removeTaskWorktree(repo!, runId, "step_2");
    await removeRunWorktrees(repo!, runId);
    expect(await markers()).toEqual([]);
    await disarmForInspection();
    expect(git(workspace, "show", `${integrationBranch(runId)}:a.txt`)).toBe("a from the task\n");
    expect(git(workspace, "show", `${integrationBranch(runId)}:task.txt`)).toBe("added by the task\n");
    expect(git(workspace, "worktree", "list", "--porcelain")).not.toContain(worktree);
  });
});
