import { constants as fsConstants } from "node:fs";
import fs, { type FileHandle } from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { AppError } from "../errors";
import { defineTool } from "./types";
import {
  confinementError,
  fdPath,
  openWorkspaceDirectory,
  resolveInWorkspace,
  verifyDescriptor,
} from "./workspace-path";

export const deletePathTool = defineTool({
  name: "delete_path",
  description:
    "Delete a file, symlink or directory in the workspace. A non-empty directory needs recursive; " +
    "a symlink is removed itself, never what it points to. The workspace root cannot be deleted.",
  inputSchema: z.object({
    path: z.string().min(1).describe("Path relative to the workspace root"),
    recursive: z.boolean().default(false).describe("Delete a directory with everything in it"),
    ignoreMissing: z.boolean().default(false).describe("Succeed (deleted: false) when the path does not exist"),
  }),
  outputSchema: z.object({ path: z.string(), deleted: z.boolean(), type: z.enum(["file", "dir", "symlink", "none"]) }),
  capability: "fs.write",
  capabilityLabel: "Delete files",
  readOnly: false,
  destructive: true,
  idempotent: false,
  requiresApproval: true,
  defaultTimeoutSeconds: 60,
  marksEffectStart: true,
  async execute(input, context) {
    const root = await fs.realpath(context.workspaceRoot);
    // Resolve the parent only: resolving the path itself would follow a symlink and delete its target.
    const name = path.basename(path.normalize(input.path));
    const parent = await resolveInWorkspace(root, path.dirname(path.normalize(input.path)));
    if (name === "." || name === ".." || name === "" || path.join(parent, name) === root) {
      throw new AppError("forbidden", "The workspace root cannot be deleted");
    }
    // Hold the parent by descriptor and act on the name under it: a swap cannot redirect the delete.
    const dir = await openWorkspaceDirectory(root, path.relative(root, parent), input.path).catch((error: unknown) => {
      if (input.ignoreMissing && error instanceof AppError && error.code === "not_found") return undefined;
      throw error;
    });
    if (!dir) return { path: input.path, deleted: false, type: "none" as const };
    try {
      const target = fdPath(dir.handle, name);
      const stat = await fs.lstat(target).catch((error: NodeJS.ErrnoException) => {
        if (error.code === "ENOENT" || error.code === "ENOTDIR") return undefined;
        throw error;
      });
      if (!stat) {
        if (input.ignoreMissing) return { path: input.path, deleted: false, type: "none" as const };
        throw new AppError("not_found", `No such file or directory in the workspace: ${input.path}`);
      }
      context.signal.throwIfAborted();
      await context.effectsStarting();
      if (stat.isDirectory()) {
        if (!input.recursive) {
          const entries = await fs.readdir(target);
          if (entries.length > 0) {
            throw new AppError(
              "invalid_input",
              `${input.path} is a directory with ${entries.length} entries; set recursive to delete it with its contents`,
            );
          }
        } else {
          await removeContents(root, dir.handle, name, input.path, context.signal);
        }
        // rmdir never follows a symlink: one swapped in meanwhile fails with ENOTDIR.
        await fs.rmdir(target).catch((error: NodeJS.ErrnoException) => {
          throw confinementError(error, input.path);
        });
        return { path: input.path, deleted: true, type: "dir" as const };
      }
      // unlink removes a symlink itself, never its target.
      await fs.unlink(target);
      return {
        path: input.path,
        deleted: true,
        type: stat.isSymbolicLink() ? ("symlink" as const) : ("file" as const),
      };
    } finally {
      await dir.close();
    }
  },
});

/**
 * Empties directory `name` under `parent` depth-first, each level held open with O_NOFOLLOW, so a
 * subdirectory swapped for a symlink mid-way is unlinked as a link rather than entered.
 */
async function removeContents(
  root: string,
  parent: FileHandle,
  name: string,
  displayPath: string,
  signal: AbortSignal,
): Promise<void> {
  const handle = await fs
    .open(fdPath(parent, name), fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW)
    .catch((error: NodeJS.ErrnoException) => {
      throw confinementError(error, displayPath);
    });
  try {
    await verifyDescriptor(root, handle, displayPath);
    for (const entry of await fs.readdir(fdPath(handle), { withFileTypes: true })) {
      signal.throwIfAborted();
      if (entry.isDirectory()) {
        await removeContents(root, handle, entry.name, displayPath, signal);
        await fs.rmdir(fdPath(handle, entry.name));
      } else {
        await fs.unlink(fdPath(handle, entry.name));
      }
    }
  } finally {
    await handle.close();
  }
}
