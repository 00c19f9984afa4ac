import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { git } from "../../tests/git-fixture";
import { listDirectory } from "./git-dir-listings";
import { inspectRepositories } from "./git-repositories";
import { sandboxAvailable } from "./sandbox";

/**
 * The scan keeps directory listings between scans (git-dir-listings.ts): a nested repository that
 * appears, deep down or by a directory swapped in, after the listings were kept is still found by
 * the next scan — refused when it leads outside, disarmed when it names a program.
 */
let root: string;
let outside: string;
beforeEach(async () => {
  root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-listings-")));
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-listings-outside-")));
  await fs.mkdir(path.join(root, "a/b/c"), { recursive: true });
  await fs.mkdir(path.join(root, "d"), { recursive: true });
  await fs.writeFile(path.join(root, "a/b/c/file.txt"), "x\n");
  git(root, "init", "--quiet", "--initial-branch=main");
  git(outside, "init", "--quiet", "--initial-branch=main");
});
afterEach(async () => {
  await fs.rm(root, { recursive: true, force: true });
  await fs.rm(outside, { recursive: true, force: true });
});

/** Past the racy margin (two seconds) of every change so far: listings are kept from now on. */
async function settled(): Promise<void> {
  await new Promise((resolve) => setTimeout(resolve, 2_100));
}

const scan = () => inspectRepositories(root, { enclosing: "refuse" });

describe("directory listings kept between scans", () => {
  it("gives the entries readdir gives, and a changed directory's new entries at once", async () => {
    await settled();
    const dir = path.join(root, "a/b");
    expect(await listDirectory(dir)).toEqual([{ name: "c", isDirectory: true }]);
    expect(await listDirectory(dir)).toEqual([{ name: "c", isDirectory: true }]);
    await fs.writeFile(path.join(dir, "new.txt"), "y\n");
    expect((await listDirectory(dir))?.map((entry) => entry.name).sort()).toEqual(["c", "new.txt"]);
    await fs.rm(path.join(dir, "c"), { recursive: true });
    await fs.writeFile(path.join(dir, "c"), "now a file\n");
    expect((await listDirectory(dir))?.find((entry) => entry.name === "c")).toEqual({ name: "c", isDirectory: false });
    await fs.rm(dir, { recursive: true });
    expect(await listDirectory(dir)).toBeUndefined();
  });
});

describe.runIf(sandboxAvailable())("the repository scan with kept listings", () => {
  it("finds a nested .git made deep down after the listings were kept", async () => {
    await settled();
    expect((await scan()).refusal).toBeUndefined();
    expect((await scan()).refusal).toBeUndefined();
    await fs.writeFile(path.join(root, "a/b/c/.git"), `gitdir: ${path.join(outside, ".git")}\n`);
    expect((await scan()).refusal).toMatch(/points to a git directory outside the workspace/);
  });

  it("finds a nested repository in a directory swapped in under the same name", async () => {
    await settled();
    expect((await scan()).refusal).toBeUndefined();
    const swapped = path.join(root, "swap");
    await fs.mkdir(path.join(swapped, "inner"), { recursive: true });
    await fs.writeFile(path.join(swapped, "inner/.git"), `gitdir: ${path.join(outside, ".git")}\n`);
    await fs.rm(path.join(root, "d"), { recursive: true });
    await fs.rename(swapped, path.join(root, "d"));
    expect((await scan()).refusal).toMatch(/d\/inner\/\.git points to a git directory outside the workspace/);
  });
});
