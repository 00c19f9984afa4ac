import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Worker } from "node:worker_threads";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { deletePathTool } from "./delete-path";
import { editFileTool } from "./edit-file";
import { globTool } from "./glob";
import { listDirTool } from "./list-dir";
import { readFileTool } from "./read-file";
import { searchTextTool } from "./search-text";
import { createToolContext, rejectionOf, runTool } from "./tool-test-support";
import { writeFileTool } from "./write-file";

const TRIES = 200;
const SECRET = "TOP-SECRET-OUTSIDE";

/**
 * An attacker inside the workspace (a command, another tool, a concurrent process) keeps swapping
 * the directory `d` between a real directory and a symlink to a directory outside the workspace.
 * A tool that checks a path and then opens it again by name can be redirected between the two.
 */
const SWAPPER = `
const { workerData } = require("node:worker_threads");
const fs = require("node:fs");
const path = require("node:path");
const flag = new Int32Array(workerData.flag);
const d = path.join(workerData.root, "d");
const realDir = path.join(workerData.root, "real-d");
const linkDir = path.join(workerData.root, "link-d");
while (Atomics.load(flag, 0) === 0) {
  try { fs.renameSync(realDir, d); fs.renameSync(d, realDir); } catch {}
  try { fs.renameSync(linkDir, d); fs.renameSync(d, linkDir); } catch {}
}
`;

let base: string;
let root: string;
let outside: string;

beforeEach(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-race-")));
  root = path.join(base, "workspace");
  outside = path.join(base, "outside");
  await fs.mkdir(path.join(root, "real-d"), { recursive: true });
  await fs.mkdir(outside);
  await fs.writeFile(path.join(root, "real-d", "secret.txt"), "inside ORIGINAL");
  await fs.writeFile(path.join(outside, "secret.txt"), `${SECRET} ORIGINAL`);
  await fs.writeFile(path.join(outside, "victim.txt"), "must survive");
  await fs.writeFile(path.join(outside, "outside-only.txt"), "listing me is an escape");
  await fs.symlink(outside, path.join(root, "link-d"));
});

afterEach(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

/** Runs `attempt` TRIES times while the swapper runs; returns how many attempts escaped. */
async function underSwap(attempt: () => Promise<boolean>): Promise<number> {
  const flag = new SharedArrayBuffer(4);
  const worker = new Worker(SWAPPER, { eval: true, workerData: { root, flag } });
  let escapes = 0;
  try {
    for (let i = 0; i < TRIES; i++) {
      if (await attempt()) escapes++;
    }
  } finally {
    Atomics.store(new Int32Array(flag), 0, 1);
    await worker.terminate();
  }
  return escapes;
}

const context = () => createToolContext(root);
const settle = <T>(promise: Promise<T>) =>
  promise.then(
    (value) => value,
    () => undefined,
  );

async function outsideNames(): Promise<string[]> {
  return (await fs.readdir(outside)).sort();
}

// 200 tries per tool against a thread that swaps as fast as it can: write_file took 45 s at load 40.
describe("file tools under a concurrent directory/symlink swap", { timeout: 180_000 }, () => {
  it("read_file never reads the outside file", async () => {
    const escapes = await underSwap(async () => {
      const text = await settle(runTool(readFileTool, { path: "d/secret.txt" }, context()));
      return typeof text === "string" && text.includes(SECRET);
    });
    expect(escapes).toBe(0);
  });

  it("write_file never creates a file outside", async () => {
    const escapes = await underSwap(async () => {
      await settle(runTool(writeFileTool, { path: "d/new.txt", content: "planted" }, context()));
      const escaped = (await outsideNames()).some(
        (name) => name !== "secret.txt" && name !== "victim.txt" && name !== "outside-only.txt",
      );
      if (escaped) {
        for (const name of await outsideNames()) {
          if (!["secret.txt", "victim.txt", "outside-only.txt"].includes(name)) await fs.rm(path.join(outside, name));
        }
      }
      return escaped;
    });
    expect(escapes).toBe(0);
  });

  it("list_dir never lists the outside directory", async () => {
    const escapes = await underSwap(async () => {
      const entries = await settle(runTool(listDirTool, { path: "d" }, context()));
      return !!entries?.some((entry) => entry.name === "outside-only.txt");
    });
    expect(escapes).toBe(0);
  });

  it("search_text never searches the outside directory", async () => {
    const escapes = await underSwap(async () => {
      const result = await settle(runTool(searchTextTool, { pattern: SECRET, path: "d" }, context()));
      return (result?.matches.length ?? 0) > 0;
    });
    expect(escapes).toBe(0);
  });

  it("glob never walks the outside directory", async () => {
    const escapes = await underSwap(async () => {
      const result = await settle(runTool(globTool, { pattern: "d/*" }, context()));
      return !!result?.paths.some((found) => found.endsWith("outside-only.txt"));
    });
    expect(escapes).toBe(0);
  });

  it("edit_file never rewrites the outside file", async () => {
    const before = await fs.stat(path.join(outside, "secret.txt"));
    const escapes = await underSwap(async () => {
      await settle(
        runTool(editFileTool, { path: "d/secret.txt", oldString: "ORIGINAL", newString: "ORIGINAL" }, context()),
      );
      const after = await fs.stat(path.join(outside, "secret.txt"));
      const names = await outsideNames();
      return after.ino !== before.ino || after.mtimeMs !== before.mtimeMs || names.length !== 3;
    });
    expect(escapes).toBe(0);
    expect(await fs.readFile(path.join(outside, "secret.txt"), "utf8")).toBe(`${SECRET} ORIGINAL`);
  });

  it("delete_path never deletes outside", async () => {
    const escapes = await underSwap(async () => {
      await fs.writeFile(path.join(root, "real-d", "victim.txt"), "inside").catch(() => undefined);
      await settle(runTool(deletePathTool, { path: "d/victim.txt", ignoreMissing: true }, context()));
      const gone = !(await outsideNames()).includes("victim.txt");
      if (gone) await fs.writeFile(path.join(outside, "victim.txt"), "must survive");
      return gone;
    });
    expect(escapes).toBe(0);
  });
});

describe("hard links to files outside the workspace", () => {
  beforeEach(async () => {
    await fs.link(path.join(outside, "secret.txt"), path.join(root, "linked.txt"));
  });

  it("read_file refuses a hard-linked file", async () => {
    const error = await rejectionOf(runTool(readFileTool, { path: "linked.txt" }, context()));
    expect(error).toBeInstanceOf(AppError);
    expect((error as AppError).code).toBe("forbidden");
    expect(error.message).toContain("linked.txt");
    expect(error.message).not.toContain(base);
  });

  it("write_file and edit_file refuse a hard-linked file and leave the outside file alone", async () => {
    const write = await rejectionOf(runTool(writeFileTool, { path: "linked.txt", content: "overwritten" }, context()));
    expect((write as AppError).code).toBe("forbidden");
    const edit = await rejectionOf(
      runTool(editFileTool, { path: "linked.txt", oldString: "ORIGINAL", newString: "EDITED" }, context()),
    );
    expect((edit as AppError).code).toBe("forbidden");
    expect(await fs.readFile(path.join(outside, "secret.txt"), "utf8")).toBe(`${SECRET} ORIGINAL`);
  });

  it("search_text skips a hard-linked file", async () => {
    const result = await runTool(searchTextTool, { pattern: SECRET }, context());
    expect(result.matches).toEqual([]);
  });
});
