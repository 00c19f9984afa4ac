import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { GitCommandError, GIT_OUTPUT_LIMIT, openRepository, runGit } from "./git";
import { gitCommitTool } from "./git-commit";
import { gitDiffTool } from "./git-diff";
import { gitLogTool } from "./git-log";
import { gitStatusTool } from "./git-status";
import { builtinRegistry } from "./registry";
import { SANDBOX_LIMITS } from "./sandbox";
import {
  createTempWorkspace,
  createToolContext,
  rejectionOf,
  removeTempWorkspace,
  runTool,
  writeFiles,
} from "./tool-test-support";
import type { ToolDefinition } from "./types";

let root: string;

/** Real git, isolated from the machine's global and system configuration. */
const isolatedEnv = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" };

function git(cwd: string, ...args: string[]): string {
  return execFileSync("git", args, { cwd, encoding: "utf8", env: isolatedEnv });
}

async function initRepository(dir: string): Promise<void> {
  git(dir, "init", "--quiet", "--initial-branch=main");
  git(dir, "config", "user.name", "Test Author");
  git(dir, "config", "user.email", "author@example.com");
}

async function commitAll(dir: string, message: string): Promise<string> {
  git(dir, "add", "--all");
  git(dir, "commit", "--quiet", "-m", message);
  return git(dir, "rev-parse", "HEAD").trim();
}

beforeEach(async () => {
  root = await createTempWorkspace();
  process.env.GIT_CONFIG_GLOBAL = "/dev/null";
  process.env.GIT_CONFIG_NOSYSTEM = "1";
});

afterEach(async () => {
  delete process.env.GIT_CONFIG_GLOBAL;
  delete process.env.GIT_CONFIG_NOSYSTEM;
  await removeTempWorkspace(root);
});

const run = <I, O>(tool: ToolDefinition<I, O>, input: unknown = {}, workspace = root) =>
  runTool(tool, input, createToolContext(workspace));

async function expectAppError(promise: Promise<unknown>, code: AppError["code"]): Promise<AppError> {
  const error = await rejectionOf(promise);
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(code);
  return error as AppError;
}

describe("git tool metadata", () => {
  it("registers the read tools as read-only and git_commit as a gated write", () => {
    for (const name of ["git_status", "git_diff", "git_log"]) {
      expect(builtinRegistry.get(name)).toMatchObject({
        capability: "git.read",
        readOnly: true,
        requiresApproval: false,
      });
    }
    expect(builtinRegistry.get("git_commit")).toMatchObject({
      capability: "git.write",
      readOnly: false,
      requiresApproval: true,
    });
  });
});

describe("git_status", () => {
  it("says clearly when the workspace is not a repository", async () => {
    const error = await expectAppError(run(gitStatusTool), "invalid_input");
    expect(error.message).toContain("not inside a git repository");
  });

  it("reports an empty repository: branch, no head, untracked files", async () => {
    await initRepository(root);
    await writeFiles(root, { "new file.txt": "x" });
    expect(await run(gitStatusTool)).toEqual({
      branch: "main",
      head: null,
      upstream: null,
      ahead: 0,
      behind: 0,
      clean: false,
      files: [{ path: "new file.txt", staged: "untracked", unstaged: "untracked", conflicted: false }],
    });
  });

  it("reports staged, unstaged, deleted and renamed files, and a clean tree", async () => {
    await initRepository(root);
    await writeFiles(root, { "a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "old name.txt": "o\n" });
    const head = await commitAll(root, "first");
    expect(await run(gitStatusTool)).toMatchObject({ head, clean: true, files: [] });

    await writeFiles(root, { "a.txt": "a2\n", "b.txt": "b2\n", "d.txt": "d\n" });
    git(root, "add", "b.txt", "d.txt");
    await fs.rm(path.join(root, "c.txt"));
    git(root, "mv", "old name.txt", "new name.txt");
    const status = await run(gitStatusTool);
    expect(status.clean).toBe(false);
    expect(status.files).toEqual(
      expect.arrayContaining([
        { path: "a.txt", staged: "unmodified", unstaged: "modified", conflicted: false },
        { path: "b.txt", staged: "modified", unstaged: "unmodified", conflicted: false },
        { path: "c.txt", staged: "unmodified", unstaged: "deleted", conflicted: false },
        { path: "d.txt", staged: "added", unstaged: "unmodified", conflicted: false },
        {
          path: "new name.txt",
          originalPath: "old name.txt",
          staged: "renamed",
          unstaged: "unmodified",
          conflicted: false,
        },
      ]),
    );
    expect(status.files).toHaveLength(5);
  });

  it("reports the upstream with ahead and behind counts", async () => {
    const upstream = await createTempWorkspace();
    try {
      await initRepository(upstream);
      await writeFiles(upstream, { "a.txt": "a\n" });
      await commitAll(upstream, "first");
      await fs.rm(root, { recursive: true });
      git(path.dirname(root), "clone", "--quiet", upstream, root);
      await initRepository(root);
      await writeFiles(root, { "local.txt": "l\n" });
      await commitAll(root, "local");
      await writeFiles(upstream, { "remote.txt": "r\n" });
      await commitAll(upstream, "remote 1");
      await writeFiles(upstream, { "remote2.txt": "r\n" });
      await commitAll(upstream, "remote 2");
      git(root, "fetch", "--quiet");
      expect(await run(gitStatusTool)).toMatchObject({ branch: "main", upstream: "origin/main", ahead: 1, behind: 2 });
    } finally {
      await removeTempWorkspace(upstream);
    }
  });

  it("marks merge conflicts", async () => {
    await initRepository(root);
    await writeFiles(root, { "a.txt": "base\n" });
    await commitAll(root, "base");
    git(root, "checkout", "--quiet", "-b", "other");
    await writeFiles(root, { "a.txt": "other\n" });
    await commitAll(root, "other");
    git(root, "checkout", "--quiet", "main");
    await writeFiles(root, { "a.txt": "main\n" });
    await commitAll(root, "main");
    expect(() => git(root, "merge", "--quiet", "other")).toThrow();
    const status = await run(gitStatusTool);
    expect(status.files).toEqual([{ path: "a.txt", staged: "unmerged", unstaged: "unmerged", conflicted: true }]);
  });

  it("in a workspace below the repository top, refuses: git would read beyond the workspace", async () => {
    // The read-only git tools run unapproved, so everything git uses must lie inside the workspace
    // (docs/security.md, "Git without surprises"); git_commit, approved by a person, still may.
    await initRepository(root);
    await writeFiles(root, { "outside.txt": "o\n", "pkg/inside.txt": "i\n" });
    await commitAll(root, "first");
    await writeFiles(root, { "outside.txt": "o2\n", "pkg/inside.txt": "i2\n", "pkg/new.txt": "n\n" });
    await expect(run(gitStatusTool, {}, path.join(root, "pkg"))).rejects.toThrow(
      /inside a repository whose top level is outside it/,
    );
  });
});

describe("git_diff", () => {
  beforeEach(async () => {
    await initRepository(root);
    await writeFiles(root, { "a.txt": "one\ntwo\nthree\n", "b.txt": "b\n", "img.bin": Buffer.from([0, 1, 2, 3]) });
    await commitAll(root, "first");
  });

  it("shows unstaged changes with per-file counts", async () => {
    await writeFiles(root, { "a.txt": "one\n2\nthree\nfour\n" });
    const result = await run(gitDiffTool);
    expect(result.files).toEqual([{ path: "a.txt", additions: 2, deletions: 1, binary: false }]);
    expect(result.diff).toContain("--- a/a.txt");
    expect(result.diff).toContain("-two\n+2\n");
    expect(result.truncated).toBe(false);
  });

  it("separates staged from unstaged changes", async () => {
    await writeFiles(root, { "a.txt": "staged\n" });
    git(root, "add", "a.txt");
    await writeFiles(root, { "b.txt": "unstaged\n" });
    expect((await run(gitDiffTool)).files.map((file) => file.path)).toEqual(["b.txt"]);
    expect((await run(gitDiffTool, { staged: true })).files.map((file) => file.path)).toEqual(["a.txt"]);
  });

  it("compares two commits, reports binary files and renames", async () => {
    const first = git(root, "rev-parse", "HEAD").trim();
    git(root, "mv", "b.txt", "renamed.txt");
    await writeFiles(root, { "img.bin": Buffer.from([0, 9, 9, 9]) });
    await commitAll(root, "second");
    const result = await run(gitDiffTool, { base: first, target: "HEAD" });
    expect(result.files).toEqual(
      expect.arrayContaining([
        { path: "img.bin", additions: null, deletions: null, binary: true },
        { path: "renamed.txt", originalPath: "b.txt", additions: 0, deletions: 0, binary: false },
      ]),
    );
  });

  it("limits the diff to paths, which must stay inside the workspace", async () => {
    await writeFiles(root, { "a.txt": "changed\n", "b.txt": "changed\n" });
    expect((await run(gitDiffTool, { paths: ["b.txt"] })).files.map((file) => file.path)).toEqual(["b.txt"]);
    await expectAppError(run(gitDiffTool, { paths: ["../elsewhere"] }), "forbidden");
  });

  it("refuses revisions that look like options and reports unknown ones", async () => {
    expect(gitDiffTool.inputSchema.safeParse({ base: "--output=/tmp/x" }).success).toBe(false);
    expect(gitDiffTool.inputSchema.safeParse({ base: "HEAD", target: "-p" }).success).toBe(false);
    expect(gitDiffTool.inputSchema.safeParse({ target: "HEAD" }).success).toBe(false);
    const error = await rejectionOf(run(gitDiffTool, { base: "no-such-branch" }));
    expect(error).toBeInstanceOf(GitCommandError);
    expect(error.message).toContain("no-such-branch");
  });
});

describe("git_log", () => {
  it("returns an empty history for a repository without commits", async () => {
    await initRepository(root);
    expect(await run(gitLogTool)).toEqual({ commits: [] });
  });

  it("lists commits newest first with structured fields", async () => {
    await initRepository(root);
    await writeFiles(root, { "a.txt": "a\n" });
    const first = await commitAll(root, "First commit");
    await writeFiles(root, { "b.txt": "b\n" });
    git(root, "add", "b.txt");
    git(root, "commit", "--quiet", "-m", "Second commit", "-m", "With a body\nof two lines");
    const second = git(root, "rev-parse", "HEAD").trim();

    const { commits } = await run(gitLogTool);
    expect(commits).toHaveLength(2);
    expect(commits[0]).toMatchObject({
      hash: second,
      shortHash: second.slice(0, commits[0]!.shortHash.length),
      parents: [first],
      author: { name: "Test Author", email: "author@example.com" },
      subject: "Second commit",
      body: "With a body\nof two lines",
    });
    expect(new Date(commits[0]!.authoredAt).getTime()).not.toBeNaN();
    expect(commits[1]).toMatchObject({ hash: first, parents: [], subject: "First commit", body: "" });
  });

  it("honours maxCount, skip, revision and paths", async () => {
    await initRepository(root);
    for (const name of ["a", "b", "c"]) {
      await writeFiles(root, { [`${name}.txt`]: name });
      await commitAll(root, `add ${name}`);
    }
    const subjects = async (input: Record<string, unknown>) =>
      (await run(gitLogTool, input)).commits.map((commit) => commit.subject);
    expect(await subjects({ maxCount: 1 })).toEqual(["add c"]);
    expect(await subjects({ skip: 1 })).toEqual(["add b", "add a"]);
    expect(await subjects({ revision: "HEAD~1" })).toEqual(["add b", "add a"]);
    expect(await subjects({ paths: ["a.txt"] })).toEqual(["add a"]);
    const error = await rejectionOf(run(gitLogTool, { revision: "nope" }));
    expect(error.message).toContain("Unknown revision: nope");
    expect(gitLogTool.inputSchema.safeParse({ revision: "--all" }).success).toBe(false);
  });
});

describe("git_commit", () => {
  beforeEach(async () => {
    await initRepository(root);
    await writeFiles(root, { "a.txt": "a\n", "gone.txt": "g\n" });
    await commitAll(root, "first");
  });

  it("refuses when nothing is staged and changes nothing", async () => {
    await writeFiles(root, { "a.txt": "unstaged\n" });
    const before = git(root, "rev-parse", "HEAD");
    const error = await expectAppError(run(gitCommitTool, { message: "x" }), "invalid_input");
    expect(error.message).toContain("Nothing to commit");
    expect(git(root, "rev-parse", "HEAD")).toBe(before);
  });

  it("stages the given paths and commits them, returning the new commit", async () => {
    await writeFiles(root, { "a.txt": "changed\n", "other.txt": "not committed\n" });
    const result = await run(gitCommitTool, { message: "Change a\n\nBecause.", paths: ["a.txt"] });
    expect(result).toEqual({
      hash: git(root, "rev-parse", "HEAD").trim(),
      shortHash: expect.any(String),
      branch: "main",
      subject: "Change a",
      files: ["a.txt"],
    });
    expect(git(root, "log", "-1", "--format=%B").trim()).toBe("Change a\n\nBecause.");
    expect(git(root, "status", "--porcelain")).toBe("?? other.txt\n");
  });

  it("with all, stages additions, changes and deletions", async () => {
    await writeFiles(root, { "a.txt": "changed\n", "new.txt": "n\n" });
    await fs.rm(path.join(root, "gone.txt"));
    const result = await run(gitCommitTool, { message: "Everything", all: true });
    expect(result.files.sort()).toEqual(["a.txt", "gone.txt", "new.txt"]);
    expect(git(root, "status", "--porcelain")).toBe("");
  });

  it("keeps a message that starts with a dash as the message", async () => {
    await writeFiles(root, { "a.txt": "changed\n" });
    const result = await run(gitCommitTool, { message: "--amend is not an option here", all: true });
    expect(result.subject).toBe("--amend is not an option here");
    expect(git(root, "rev-list", "--count", "HEAD").trim()).toBe("2");
  });

  it("falls back to a Stepwise identity when git has none configured", async () => {
    git(root, "config", "--unset", "user.name");
    git(root, "config", "--unset", "user.email");
    await writeFiles(root, { "a.txt": "changed\n" });
    await run(gitCommitTool, { message: "Anonymous", all: true });
    expect(git(root, "log", "-1", "--format=%an <%ae>").trim()).toBe("Stepwise <stepwise@localhost>");
  });

  it("refuses a commit that would include changes staged outside a sub-directory workspace", async () => {
    await writeFiles(root, { "pkg/inside.txt": "i\n" });
    await commitAll(root, "pkg");
    await writeFiles(root, { "a.txt": "outside change\n", "pkg/inside.txt": "inside change\n" });
    git(root, "add", "a.txt");
    const error = await expectAppError(
      run(gitCommitTool, { message: "pkg only", all: true }, path.join(root, "pkg")),
      "forbidden",
    );
    expect(error.message).toContain("a.txt");
    git(root, "reset", "--quiet", "a.txt");
    const result = await run(gitCommitTool, { message: "pkg only", all: true }, path.join(root, "pkg"));
    expect(result.files).toEqual(["inside.txt"]);
  });

  it("refuses paths outside the workspace and contradictory input", async () => {
    await expectAppError(run(gitCommitTool, { message: "x", paths: ["../x"] }), "forbidden");
    expect(gitCommitTool.inputSchema.safeParse({ message: "x", all: true, paths: ["a"] }).success).toBe(false);
    expect(gitCommitTool.inputSchema.safeParse({ message: "  " }).success).toBe(false);
  });
});

describe("a git's output", () => {
  it("is kept up to the git limit, and a git writing past the sandbox's output limit is cut off", async () => {
    await initRepository(root);
    // Zeros compress to almost nothing in the repository and come out whole from cat-file.
    await fs.writeFile(path.join(root, "big.bin"), Buffer.alloc(SANDBOX_LIMITS.outputBytes + 1024 * 1024));
    await fs.writeFile(path.join(root, "small.txt"), "x".repeat(GIT_OUTPUT_LIMIT + 10));
    await commitAll(root, "outputs");
    const signal = AbortSignal.timeout(60_000);
    const repository = await openRepository(root, signal);
    const small = await runGit(["cat-file", "blob", "HEAD:small.txt"], {
      cwd: root,
      signal,
      repository,
      readOnly: true,
    });
    expect(small).toMatchObject({ exitCode: 0, truncated: true });
    expect(small.stdout).toHaveLength(GIT_OUTPUT_LIMIT);
    // Past the sandbox's limit the pipe closes: git ends on SIGPIPE instead of writing on.
    const error = await rejectionOf(
      runGit(["cat-file", "blob", "HEAD:big.bin"], { cwd: root, signal, repository, readOnly: true }),
    );
    expect(error).toBeInstanceOf(GitCommandError);
    expect((error as GitCommandError).output.exitCode).not.toBe(0);
  });
});
