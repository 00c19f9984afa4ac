import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { gitDiffTool } from "./git-diff";
import { gitLogTool } from "./git-log";
import { gitStatusTool } from "./git-status";
import { shellTool } from "./shell";
import { createToolContext, runTool } from "./tool-test-support";

/**
 * A workspace whose own `.git/config` and `.gitattributes` name a program for every way git can be
 * made to run one while "only reading": fsmonitor, clean/smudge/process filters, textconv, diff
 * drivers, diff.external, gpg.program with log.showSignature, and hooks. Each program leaves a
 * marker (and the environment it saw) in a directory outside the workspace. After every read-only
 * git tool and every shell git command, no marker may exist.
 */

const VECTORS = ["fsmonitor", "clean", "smudge", "process", "textconv", "diffcmd", "external", "gpg", "hook"] as const;

let workspace: string;
let outside: string;

function git(...args: string[]): string {
  return execFileSync("git", args, {
    cwd: workspace,
    encoding: "utf8",
    env: { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null", GIT_CONFIG_NOSYSTEM: "1" },
  });
}

async function markers(): Promise<string[]> {
  return (await fs.readdir(outside)).filter((name) => name.endsWith(".ran")).sort();
}

beforeAll(async () => {
  workspace = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-git-evil-")));
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-git-markers-")));
  git("init", "--quiet", "--initial-branch=main");
  git("config", "user.name", "Evil");
  git("config", "user.email", "evil@example.com");
  await fs.writeFile(path.join(workspace, "notes.txt"), "one\n");
  await fs.writeFile(path.join(workspace, "data.bin"), "two\n");
  git("add", "--all");
  git("commit", "--quiet", "-m", "first");
  // A commit carrying a (bogus) signature, so `log --show-signature` calls gpg.program.
  const tree = git("rev-parse", "HEAD^{tree}").trim();
  const parent = git("rev-parse", "HEAD").trim();
  const signed = [
    `tree ${tree}`,
    `parent ${parent}`,
    "author Evil <evil@example.com> 1700000000 +0000",
    "committer Evil <evil@example.com> 1700000000 +0000",
    "gpgsig -----BEGIN PGP SIGNATURE-----",
    " ",
    " iQEzBAABCAAdFiEE",
    " -----END PGP SIGNATURE-----",
    "",
    "signed",
    "",
  ].join("\n");
  const signedPath = path.join(outside, "commit.txt");
  await fs.writeFile(signedPath, signed);
  const commit = git("hash-object", "-w", "-t", "commit", signedPath).trim();
  git("update-ref", "refs/heads/main", commit);
  await fs.rm(signedPath);

  const bin = path.join(outside, "bin");
  await fs.mkdir(bin);
  for (const vector of VECTORS) {
    // Records that it ran and what it could see, then behaves enough like the real thing.
    const script = `#!/bin/sh\nenv > "${outside}/${vector}.ran"\n${vector === "clean" || vector === "smudge" || vector === "textconv" ? 'cat "${1:--}"' : "exit 1"}\n`;
    await fs.writeFile(path.join(bin, vector), script, { mode: 0o755 });
  }
  const hooks = path.join(workspace, ".git", "hooks");
  for (const hook of ["post-index-change", "pre-commit", "post-checkout", "reference-transaction"]) {
    await fs.writeFile(path.join(hooks, hook), `#!/bin/sh\nenv > "${outside}/hook.ran"\n`, { mode: 0o755 });
  }
  const config: [string, string][] = [
    ["core.fsmonitor", `${bin}/fsmonitor`],
    ["filter.evil.clean", `${bin}/clean %f`],
    ["filter.evil.smudge", `${bin}/smudge %f`],
    ["filter.evil.required", "true"],
    ["filter.proc.process", `${bin}/process`],
    ["diff.evil.textconv", `${bin}/textconv`],
    ["diff.drv.command", `${bin}/diffcmd`],
    ["diff.external", `${bin}/external`],
    ["log.showSignature", "true"],
    ["gpg.program", `${bin}/gpg`],
  ];
  for (const [key, value] of config) git("config", key, value);
  await fs.writeFile(
    path.join(workspace, ".gitattributes"),
    "*.txt filter=evil diff=evil\n*.bin diff=drv filter=proc\n",
  );
  // Change both files and make the index stale, so status and diff must look at their content.
  await fs.writeFile(path.join(workspace, "notes.txt"), "one changed\n");
  await fs.writeFile(path.join(workspace, "data.bin"), "two changed\n");
  const past = new Date(Date.now() + 5_000);
  await fs.utimes(path.join(workspace, "notes.txt"), past, past);
  expect(await markers()).toEqual([]);
});

afterAll(async () => {
  await fs.rm(workspace, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});

describe("read-only git in a workspace that names programs in its own git configuration", () => {
  it("the plain git binary would run them: the fixture is armed", async () => {
    // Without Stepwise's hardening, ordinary read commands run the workspace's programs.
    const env = { ...process.env, GIT_CONFIG_GLOBAL: "/dev/null" };
    const commands = [
      ["status"],
      ["diff", "--", "notes.txt"],
      ["diff", "--no-ext-diff", "--", "notes.txt"],
      ["diff", "--", "data.bin"],
      ["-c", "filter.proc.process=", "diff", "--", "data.bin"],
      ["log", "-1", "-p"],
    ];
    for (const args of commands) {
      try {
        execFileSync("git", args, { cwd: workspace, env, stdio: "ignore" });
      } catch {
        // The fake programs do not speak every protocol; that they ran is what counts.
      }
    }
    const ran = await markers();
    for (const name of ran) await fs.rm(path.join(outside, name));
    expect(ran).toEqual(VECTORS.map((vector) => `${vector}.ran`).sort());
  });

  it("git_status, git_diff and git_log run none of them", async () => {
    const context = createToolContext(workspace);
    await runTool(gitStatusTool, {}, context);
    await runTool(gitDiffTool, {}, context);
    await runTool(gitDiffTool, { staged: true }, context);
    await runTool(gitDiffTool, { base: "HEAD~1" }, context);
    await runTool(gitLogTool, { maxCount: 5 }, context);
    expect(await markers()).toEqual([]);
  });

  it("git commands in a shell step run none of them, and see no server secrets", async () => {
    process.env.STEPWISE_TEST_SECRET_API_KEY = "sk-test-should-not-leak";
    try {
      for (const command of [
        "git status",
        "git diff",
        "git diff --cached",
        "git log -1 -p",
        "git log --show-signature -1",
        "git show HEAD",
      ]) {
        await runTool(shellTool, { command }, createToolContext(workspace));
      }
    } finally {
      delete process.env.STEPWISE_TEST_SECRET_API_KEY;
    }
    expect(await markers()).toEqual([]);
  });
});
