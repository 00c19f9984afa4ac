import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { deletePathTool } from "./delete-path";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";

let root: string;
let outside: string;

beforeEach(async () => {
  root = await createTempWorkspace({
    "file.txt": "x",
    "dir/a.txt": "a",
    "dir/sub/b.txt": "b",
  });
  await fs.mkdir(path.join(root, "empty"));
  outside = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-outside-")));
  await fs.writeFile(path.join(outside, "keep.txt"), "keep");
  await fs.symlink(path.join(outside, "keep.txt"), path.join(root, "link-out.txt"));
  await fs.symlink(outside, path.join(root, "dir", "link-out-dir"));
});

afterEach(async () => {
  await removeTempWorkspace(root);
  await removeTempWorkspace(outside);
});

const remove = (input: Record<string, unknown>) => runTool(deletePathTool, input, createToolContext(root));
const exists = (relative: string) =>
  fs.lstat(path.join(root, relative)).then(
    () => true,
    () => false,
  );

async function expectAppError(promise: Promise<unknown>, code: AppError["code"]): Promise<AppError> {
  const error = await rejectionOf(promise);
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe(code);
  return error as AppError;
}

describe("delete_path", () => {
  it("deletes a file", async () => {
    expect(await remove({ path: "file.txt" })).toEqual({ path: "file.txt", deleted: true, type: "file" });
    expect(await exists("file.txt")).toBe(false);
  });

  it("deletes an empty directory without recursive", async () => {
    expect(await remove({ path: "empty" })).toEqual({ path: "empty", deleted: true, type: "dir" });
    expect(await exists("empty")).toBe(false);
  });

  it("refuses a non-empty directory without recursive and keeps it", async () => {
    const error = await expectAppError(remove({ path: "dir" }), "invalid_input");
    expect(error.message).toContain("recursive");
    expect(await exists("dir/sub/b.txt")).toBe(true);
  });

  it("deletes a directory tree with recursive, unlinking symlinks inside instead of following them", async () => {
    expect(await remove({ path: "dir", recursive: true })).toMatchObject({ deleted: true, type: "dir" });
    expect(await exists("dir")).toBe(false);
    expect(await fs.readFile(path.join(outside, "keep.txt"), "utf8")).toBe("keep");
  });

  it("removes a symlink itself, never its target outside the workspace", async () => {
    expect(await remove({ path: "link-out.txt" })).toMatchObject({ deleted: true, type: "symlink" });
    expect(await exists("link-out.txt")).toBe(false);
    expect(await fs.readFile(path.join(outside, "keep.txt"), "utf8")).toBe("keep");
  });

  it("refuses paths through a symlink that leaves the workspace", async () => {
    await expectAppError(remove({ path: "dir/link-out-dir/keep.txt" }), "forbidden");
    expect(await fs.readFile(path.join(outside, "keep.txt"), "utf8")).toBe("keep");
  });

  it.each([".", "", "dir/..", "./"])("refuses to delete the workspace root via %j", async (relative) => {
    if (relative === "") {
      expect(deletePathTool.inputSchema.safeParse({ path: relative }).success).toBe(false);
      return;
    }
    await expectAppError(remove({ path: relative, recursive: true }), "forbidden");
    expect(await exists("file.txt")).toBe(true);
  });

  it.each(["..", "../x", "/etc/passwd"])("refuses %j outside the workspace", async (relative) => {
    await expectAppError(remove({ path: relative, recursive: true }), "forbidden");
  });

  it("reports a missing path, or succeeds without deleting when told to ignore it", async () => {
    await expectAppError(remove({ path: "nope.txt" }), "not_found");
    expect(await remove({ path: "nope.txt", ignoreMissing: true })).toEqual({
      path: "nope.txt",
      deleted: false,
      type: "none",
    });
  });

  it("declares itself destructive and gated", () => {
    expect(deletePathTool).toMatchObject({ destructive: true, requiresApproval: true, readOnly: false });
  });
});
