import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { resolveInWorkspace } from "./workspace-path";

let base: string;
let root: string;
let outside: string;

beforeAll(async () => {
  base = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-ws-")));
  root = path.join(base, "workspace");
  outside = path.join(base, "outside");
  await fs.mkdir(path.join(root, "sub", "deeper"), { recursive: true });
  await fs.writeFile(path.join(root, "sub", "file.txt"), "x");
  await fs.mkdir(outside);
  await fs.writeFile(path.join(outside, "secret.txt"), "secret");
  // Symlinks inside the workspace.
  await fs.symlink(outside, path.join(root, "out-link"));
  await fs.symlink(path.join(outside, "secret.txt"), path.join(root, "secret-link"));
  await fs.symlink(path.join(root, "sub"), path.join(root, "in-link"));
  await fs.symlink("sub/file.txt", path.join(root, "rel-in-link"));
  await fs.symlink("../outside", path.join(root, "rel-out-link"));
  await fs.symlink(path.join(outside, "not-there-yet.txt"), path.join(root, "dangling-out-link"));
});

afterAll(async () => {
  await fs.rm(base, { recursive: true, force: true });
});

async function expectForbidden(promise: Promise<unknown>) {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(AppError);
  expect((error as AppError).code).toBe("forbidden");
}

describe("resolveInWorkspace", () => {
  it("resolves an existing relative path inside the workspace", async () => {
    expect(await resolveInWorkspace(root, "sub/file.txt")).toBe(path.join(root, "sub", "file.txt"));
    expect(await resolveInWorkspace(root, "./sub/deeper/../file.txt")).toBe(path.join(root, "sub", "file.txt"));
  });

  it("resolves the workspace root itself", async () => {
    expect(await resolveInWorkspace(root, ".")).toBe(root);
    expect(await resolveInWorkspace(root, "")).toBe(root);
  });

  it("resolves files and directories that do not exist yet", async () => {
    expect(await resolveInWorkspace(root, "new.txt")).toBe(path.join(root, "new.txt"));
    expect(await resolveInWorkspace(root, "sub/a/b/c.txt")).toBe(path.join(root, "sub", "a", "b", "c.txt"));
  });

  it("works when the workspace root itself is given through a symlink", async () => {
    const alias = path.join(base, "alias");
    await fs.symlink(root, alias);
    expect(await resolveInWorkspace(alias, "sub/file.txt")).toBe(path.join(root, "sub", "file.txt"));
  });

  it.each(["..", "../outside/secret.txt", "sub/../../outside", "sub/deeper/../../..", "../workspace-evil/x"])(
    "refuses %j climbing out",
    async (relative) => {
      await expectForbidden(resolveInWorkspace(root, relative));
    },
  );

  it("refuses a sibling directory sharing the root's name as a prefix", async () => {
    await fs.mkdir(path.join(base, "workspace2"), { recursive: true });
    await expectForbidden(resolveInWorkspace(root, "../workspace2/file"));
  });

  it("refuses absolute paths, even ones inside the workspace", async () => {
    await expectForbidden(resolveInWorkspace(root, "/etc/passwd"));
    await expectForbidden(resolveInWorkspace(root, path.join(root, "sub", "file.txt")));
  });

  it("refuses a symlink that points outside, for the link and for paths beneath it", async () => {
    await expectForbidden(resolveInWorkspace(root, "out-link"));
    await expectForbidden(resolveInWorkspace(root, "out-link/secret.txt"));
    await expectForbidden(resolveInWorkspace(root, "out-link/new/file.txt"));
    await expectForbidden(resolveInWorkspace(root, "secret-link"));
    await expectForbidden(resolveInWorkspace(root, "rel-out-link/secret.txt"));
  });

  it("allows symlinks that point inside the workspace, resolving them", async () => {
    expect(await resolveInWorkspace(root, "in-link/file.txt")).toBe(path.join(root, "sub", "file.txt"));
    expect(await resolveInWorkspace(root, "in-link/new.txt")).toBe(path.join(root, "sub", "new.txt"));
    expect(await resolveInWorkspace(root, "rel-in-link")).toBe(path.join(root, "sub", "file.txt"));
  });

  // BUG: realpath fails with ENOENT on a dangling link, so the loop falls back to the link's
  // parent and returns the link path itself; write_file then follows the link and creates
  // outside/not-there-yet.txt outside the workspace.
  it("refuses a dangling symlink whose target lies outside the workspace", async () => {
    await expectForbidden(resolveInWorkspace(root, "dangling-out-link"));
  });
});
