import { spawnSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxAvailable } from "./sandbox";
import { readOnlyShellTool, shellTool } from "./shell";
import { analyzeShellCommand } from "./shell-read-only";
import { checkWorkspacePaths } from "./shell-workspace-paths";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";

/**
 * The workspace half of the read-only analysis: a command the parser judges read-only may still
 * name a symlink that leads out of the workspace, a pipe or device that never ends, or a file
 * hard-linked to one outside. Checked against a real directory tree.
 */
let base: string;
let workspace: string;
let outside: string;

beforeAll(async () => {
  base = await createTempWorkspace({
    "outside/secret.txt": "the secret\n",
    "outside/dir/file.txt": "outside file\n",
    "ws/README.md": "hello\n",
    "ws/src/a.ts": "export {}\n",
    "ws/patterns.txt": "x\n",
  });
  workspace = path.join(base, "ws");
  outside = path.join(base, "outside");
  await fs.symlink(path.join(outside, "secret.txt"), path.join(workspace, "out-file"));
  await fs.symlink("../outside/dir", path.join(workspace, "out-dir"));
  await fs.symlink("../../outside/secret.txt", path.join(workspace, "src", "deep-link"));
  await fs.symlink("../README.md", path.join(workspace, "src", "inner-link"));
  await fs.link(path.join(outside, "secret.txt"), path.join(workspace, "hard.txt"));
  expect(spawnSync("mkfifo", [path.join(workspace, "fifo")]).status).toBe(0);
});

afterAll(async () => {
  await removeTempWorkspace(base);
});

describe("checkWorkspacePaths", () => {
  it.each([
    ["cat out-file", "out-file leads out of the workspace through a symlink"],
    ["ls out-dir", "out-dir leads out"],
    ["cat out-dir/file.txt", "out-dir/file.txt leads out"],
    ["wc -l *", "* "], // the glob matches the fifo and the links out
    ["cat src/*", "leads out"],
    ["head s*/deep-*", "leads out"],
    ["cd src && cat deep-link", "deep-link leads out"],
    ["cd src; cat inner-link deep-link", "deep-link leads out"],
    ["(cd src && ls) && cat deep-link", "deep-link leads out"],
    ["cd out-dir && cat file.txt", "leads out"],
    ["grep -f out-file README.md", "out-file leads out"],
    ["grep -fout-file README.md", "out-file leads out"],
    ["grep -nfout-file README.md", "out-file leads out"],
    ["sort --random-source=out-file README.md", "out-file leads out"],
    ["cat < out-file", "out-file leads out"],
    ["ls\ncat out-file", "out-file leads out"],
    ["cat fifo", "fifo is a device, pipe or socket"],
    ["wc -c < fifo", "fifo is a device, pipe or socket"],
    ["cat hard.txt", "hard.txt has other hard links"],
  ])("%j is refused (%s)", async (command, reason) => {
    // The parser alone lets each through; only the workspace tells.
    expect(analyzeShellCommand(command)).toEqual({ readOnly: true });
    expect(await checkWorkspacePaths(command, workspace, workspace)).toContain(reason);
  });

  it.each([
    "cat README.md",
    "cat src/inner-link",
    "cat src/a.ts src/inner-link",
    "grep -f patterns.txt README.md",
    "cat missing.txt",
    "echo out-file fifo hard.txt",
    "ls src",
    "cd src && cat a.ts",
  ])("%j passes", async (command) => {
    expect(analyzeShellCommand(command)).toEqual({ readOnly: true });
    expect(await checkWorkspacePaths(command, workspace, workspace)).toBeUndefined();
  });

  it("resolves from the command's own directory", async () => {
    expect(await checkWorkspacePaths("cat deep-link", workspace, path.join(workspace, "src"))).toContain("leads out");
    expect(await checkWorkspacePaths("cat deep-link", workspace, workspace)).toBeUndefined();
  });
});

describe.skipIf(!sandboxAvailable())("read-only shell tools refuse what leads out", () => {
  it("shell_read refuses a symlink out of the workspace with the reason", async () => {
    const error = await rejectionOf(
      runTool(readOnlyShellTool, { command: "cat out-file" }, createToolContext(workspace)),
    );
    expect(error.message).toContain("out-file leads out of the workspace through a symlink");
  });

  it("an ungated shell step with a read-only command refuses it too, before anything runs", async () => {
    const context = createToolContext(workspace);
    let started = false;
    context.effectsStarting = async () => {
      started = true;
    };
    const error = await rejectionOf(runTool(shellTool, { command: "cat src/*" }, context));
    expect(error.message).toContain("leads out of the workspace");
    expect(started).toBe(false);
    // The same tool still reads what stays inside.
    const result = await runTool(shellTool, { command: "cat src/inner-link" }, createToolContext(workspace));
    expect(result.stdout).toBe("hello\n");
  });
});
