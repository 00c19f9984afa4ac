import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { gitDiffTool } from "./git-diff";
import { gitLogTool } from "./git-log";
import { gitStatusTool } from "./git-status";
import { sandboxAvailable } from "./sandbox";
import { shellTool } from "./shell";
import { createToolContext, rejectionOf, runTool } from "./tool-test-support";

/**
 * Every way a workspace's git can lead a command somewhere else — another repository's drivers,
 * a submodule's filter, a driver whose name holds `=`, a `.git` file or core.worktree pointing out
 * of the workspace, a man viewer behind `--help`. Each fixture plants a marker program outside the
 * workspace and a secret outside it; whatever the git tools and shell git do, no marker may run
 * and the secret never comes back. Shell git is tried both confined (a read-only step with a
 * sandbox) and unconfined (a person approved it on a worker without one), where only the
 * overrides stand between git and the programs.
 */

const SECRET = "root-only-secret-4b1d";
let base: string;
let outside: string;
let marker: string;

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, {
    cwd,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1", GIT_ALLOW_PROTOCOL: "file" },
  });
}

async function initRepository(dir: string, files: Record<string, string> = { "a.txt": "a\n" }): Promise<void> {
  await fs.mkdir(dir, { recursive: true });
  git(dir, "init", "--quiet", "--initial-branch=main");
  git(dir, "config", "user.name", "T");
  git(dir, "config", "user.email", "t@example.com");
  for (const [name, content] of Object.entries(files)) await fs.writeFile(path.join(dir, name), content);
  git(dir, "add", "--all");
  git(dir, "commit", "--quiet", "-m", "first");
}

/** Changes `file` keeping its size, with a later mtime: status and diff must read its content. */
async function touchChanged(file: string, content: string): Promise<void> {
  await fs.writeFile(file, content);
  const later = new Date(Date.now() + 5_000);
  await fs.utimes(file, later, later);
}

async function markers(): Promise<string[]> {
  return (await fs.readdir(outside)).filter((name) => name.endsWith(".ran"));
}

beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-git-escape-")));
  outside = path.join(base, "outside");
  await fs.mkdir(outside);
  await fs.writeFile(path.join(outside, "secret.txt"), `${SECRET}\n`);
  marker = path.join(outside, "marker");
  // Records that it ran, then passes its input through like a filter or viewer would.
  await fs.writeFile(marker, `#!/bin/sh\necho ran > "${outside}/$(date +%s%N).ran"\ncat\n`, { mode: 0o755 });
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

let workspace: string;
let fixture = 0;
beforeEach(async () => {
  workspace = path.join(base, `workspace-${++fixture}`);
  await fs.mkdir(workspace);
  for (const name of await markers()) await fs.rm(path.join(outside, name));
});

/** Runs a shell command as a read-only step confined, and as an approved step unconfined. */
async function shellBothWays(command: string): Promise<string> {
  let output = "";
  if (sandboxAvailable()) {
    const confined = await runTool(shellTool, { command, allowFailure: true }, createToolContext(workspace));
    output += confined.stdout + confined.stderr;
  }
  const before = process.env.STEPWISE_SANDBOX;
  process.env.STEPWISE_SANDBOX = "off";
  try {
    const context = { ...createToolContext(workspace), approvedByPerson: true };
    const unconfined = await runTool(shellTool, { command, allowFailure: true }, context);
    output += unconfined.stdout + unconfined.stderr;
  } finally {
    if (before === undefined) delete process.env.STEPWISE_SANDBOX;
    else process.env.STEPWISE_SANDBOX = before;
  }
  return output;
}

/** Runs the git tools confined (unapproved) and unconfined (approved, on a worker without a sandbox). */
async function gitToolsOutput(): Promise<string> {
  const all = async (context: ReturnType<typeof createToolContext>) => [
    await runTool(gitStatusTool, {}, context),
    await runTool(gitDiffTool, {}, context),
    await runTool(gitLogTool, { maxCount: 5 }, context),
  ];
  const results = [await all(createToolContext(workspace))];
  const before = process.env.STEPWISE_SANDBOX;
  process.env.STEPWISE_SANDBOX = "off";
  try {
    results.push(await all({ ...createToolContext(workspace), approvedByPerson: true }));
  } finally {
    if (before === undefined) delete process.env.STEPWISE_SANDBOX;
    else process.env.STEPWISE_SANDBOX = before;
  }
  return JSON.stringify(results);
}

describe.runIf(sandboxAvailable())("git that cannot leave the workspace", () => {
  it("a nested repository's drivers do not run, from the workspace or from inside it", async () => {
    await initRepository(workspace);
    const nested = path.join(workspace, "nested");
    await initRepository(nested, { "n.txt": "n\n", ".gitattributes": "*.txt filter=evil diff=evil\n" });
    git(nested, "config", "filter.evil.clean", marker);
    git(nested, "config", "filter.evil.smudge", marker);
    git(nested, "config", "diff.evil.textconv", marker);
    git(nested, "config", "diff.evil.command", marker);
    await touchChanged(path.join(nested, "n.txt"), "m\n");
    // Armed: plain git in the nested repository runs the marker.
    git(nested, "status", "--porcelain");
    expect(await markers()).not.toEqual([]);
    for (const name of await markers()) await fs.rm(path.join(outside, name));

    await gitToolsOutput();
    await shellBothWays("cd nested && git status && git diff && git log -p -2 && git show HEAD");
    await shellBothWays("git -C nested diff HEAD");
    expect(await markers()).toEqual([]);
  });

  it("a submodule's own filter does not run", async () => {
    const upstream = path.join(base, `sub-upstream-${fixture}`);
    await initRepository(upstream, { "s.txt": "s\n", ".gitattributes": "*.txt filter=subevil\n" });
    await initRepository(workspace);
    git(workspace, "-c", "protocol.file.allow=always", "submodule", "--quiet", "add", upstream, "sub");
    git(workspace, "commit", "--quiet", "-m", "add sub");
    const sub = path.join(workspace, "sub");
    git(sub, "config", "filter.subevil.clean", marker);
    await touchChanged(path.join(sub, "s.txt"), "t\n");
    git(workspace, "status", "--porcelain"); // armed: recursing into the submodule runs its filter
    expect(await markers()).not.toEqual([]);
    for (const name of await markers()) await fs.rm(path.join(outside, name));

    await gitToolsOutput();
    await shellBothWays("git status && git diff --submodule=diff && cd sub && git status && git diff");
    expect(await markers()).toEqual([]);
  });

  it("a filter named a=b is overridden under its whole name", async () => {
    await initRepository(workspace, { "a.txt": "a\n", ".gitattributes": "*.txt filter=a=b diff=c=d\n" });
    git(workspace, "config", "filter.a=b.clean", marker);
    git(workspace, "config", "diff.c=d.textconv", marker);
    await touchChanged(path.join(workspace, "a.txt"), "b\n");
    git(workspace, "status", "--porcelain");
    expect(await markers()).not.toEqual([]); // armed
    for (const name of await markers()) await fs.rm(path.join(outside, name));

    await gitToolsOutput();
    await shellBothWays("git status && git diff && git log -p -1");
    expect(await markers()).toEqual([]);
  });

  it("a .git file pointing outside the workspace is refused, and nothing outside is read", async () => {
    const elsewhere = path.join(base, `elsewhere-${fixture}`);
    await initRepository(elsewhere, { "secret.txt": `${SECRET}\n` });
    await fs.writeFile(path.join(workspace, ".git"), `gitdir: ${path.join(elsewhere, ".git")}\n`);
    for (const tool of [gitStatusTool, gitDiffTool, gitLogTool] as const) {
      const error = await rejectionOf(runTool(tool as typeof gitStatusTool, {}, createToolContext(workspace)));
      expect(error.message).toMatch(/\.git points to a git directory outside the workspace/);
      expect(error.message).not.toContain(SECRET);
    }
    // Confined, the directory it points to is not there at all.
    const confined = await runTool(
      shellTool,
      { command: "git log -p; git show HEAD:secret.txt; cat .git", allowFailure: true },
      createToolContext(workspace),
    );
    expect(confined.stdout + confined.stderr).not.toContain(SECRET);
  });

  it("core.worktree outside the workspace is refused, and nothing outside is read", async () => {
    await initRepository(workspace);
    const tree = path.join(base, `tree-${fixture}`);
    await fs.mkdir(tree);
    await fs.copyFile(path.join(outside, "secret.txt"), path.join(tree, "a.txt"));
    git(workspace, "config", "core.worktree", tree);
    const error = await rejectionOf(runTool(gitDiffTool, {}, createToolContext(workspace)));
    expect(error.message).toMatch(/sets core\.worktree outside the workspace/);
    const confined = await runTool(
      shellTool,
      { command: "git status; git diff", allowFailure: true },
      createToolContext(workspace),
    );
    expect(confined.stdout + confined.stderr).not.toContain(SECRET);
  });

  it("a workspace with its own repository inside another repository is its own repository", async () => {
    await initRepository(workspace, { "inner.txt": "i\n" });
    const outer = path.join(base, `outer-${fixture}`);
    await initRepository(outer, { "outer.txt": `${SECRET}\n` });
    const inner = path.join(outer, "inner");
    await fs.rename(workspace, inner);
    workspace = inner;
    const status = await runTool(gitStatusTool, {}, createToolContext(workspace));
    expect(status).toMatchObject({ branch: "main", clean: true });
    const log = await runTool(gitLogTool, {}, createToolContext(workspace));
    expect(log.commits).toHaveLength(1);
    expect(JSON.stringify(log)).not.toContain(SECRET);
  });

  it("a submodule whose git directory lies outside is refused", async () => {
    await initRepository(workspace);
    const elsewhere = path.join(base, `module-${fixture}`);
    await initRepository(elsewhere);
    await fs.mkdir(path.join(workspace, "mod"));
    await fs.writeFile(path.join(workspace, "mod", ".git"), `gitdir: ${path.join(elsewhere, ".git")}\n`);
    const error = await rejectionOf(runTool(gitStatusTool, {}, createToolContext(workspace)));
    expect(error.message).toMatch(/mod\/\.git points to a git directory outside the workspace/);
  });

  it("objects borrowed from outside (alternates) or a common directory outside are refused", async () => {
    const elsewhere = path.join(base, `objects-${fixture}`);
    await initRepository(elsewhere, { "secret.txt": `${SECRET}\n` });
    await initRepository(workspace);
    await fs.writeFile(
      path.join(workspace, ".git", "objects", "info", "alternates"),
      `${path.join(elsewhere, ".git", "objects")}\n`,
    );
    const borrowed = await rejectionOf(runTool(gitLogTool, {}, createToolContext(workspace)));
    expect(borrowed.message).toMatch(/borrows objects from outside the workspace \(alternates\)/);

    // A linked-worktree-style git directory inside the workspace whose commondir leads out.
    await fs.rm(path.join(workspace, ".git", "objects", "info", "alternates"));
    const linked = path.join(workspace, "linked");
    await fs.mkdir(path.join(linked, "gitdir"), { recursive: true });
    await fs.writeFile(path.join(linked, "gitdir", "HEAD"), "ref: refs/heads/main\n");
    await fs.writeFile(path.join(linked, "gitdir", "commondir"), `${path.join(elsewhere, ".git")}\n`);
    await fs.writeFile(path.join(linked, ".git"), "gitdir: gitdir\n");
    const common = await rejectionOf(runTool(gitStatusTool, {}, createToolContext(workspace)));
    expect(common.message).toMatch(/linked\/\.git shares a git directory outside the workspace \(commondir\)/);
  });

  it("git --help does not run the repository's man viewer", async () => {
    await initRepository(workspace);
    git(workspace, "config", "man.viewer", "evil");
    git(workspace, "config", "man.evil.cmd", marker);
    git(workspace, "config", "man.man.path", marker);
    git(workspace, "config", "help.format", "man");
    try {
      git(workspace, "log", "--help");
    } catch {
      // The marker is no real viewer; that it ran is what counts.
    }
    expect(await markers()).not.toEqual([]); // armed
    for (const name of await markers()) await fs.rm(path.join(outside, name));

    await shellBothWays("git log --help; git help log; git help -m log; git diff -h");
    expect(await markers()).toEqual([]);
  });
});
