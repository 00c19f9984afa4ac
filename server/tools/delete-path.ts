import fs from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { AppError } from "../errors";
import { defineTool } from "./types";
import { resolveInWorkspace } from "./workspace-path";

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
  async execute(input, context) {
    const root = await fs.realpath(context.workspaceRoot);
    // Resolve the parent only: resolving the path itself would follow a symlink and delete its target.
    const name = path.basename(path.normalize(input.path));
    const parent = await resolveInWorkspace(root, path.dirname(path.normalize(input.path)));
    if (name === "." || name === ".." || name === "" || path.join(parent, name) === root) {
      throw new AppError("forbidden", "The workspace root cannot be deleted");
    }
    const target = path.join(parent, name);
    const stat = await fs.lstat(target).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT" || error.code === "ENOTDIR") return undefined;
      throw error;
    });
    if (!stat) {
      if (input.ignoreMissing) return { path: input.path, deleted: false, type: "none" as const };
      throw new AppError("not_found", `No such file or directory in the workspace: ${input.path}`);
    }
    context.signal.throwIfAborted();
    if (stat.isDirectory()) {
      if (!input.recursive) {
        const entries = await fs.readdir(target);
        if (entries.length > 0) {
          throw new AppError(
            "invalid_input",
            `${input.path} is a directory with ${entries.length} entries; set recursive to delete it with its contents`,
          );
        }
        await fs.rmdir(target);
      } else {
        // fs.rm unlinks symlinks found inside rather than following them.
        await fs.rm(target, { recursive: true });
      }
      return { path: input.path, deleted: true, type: "dir" as const };
    }
    await fs.unlink(target);
    return { path: input.path, deleted: true, type: stat.isSymbolicLink() ? ("symlink" as const) : ("file" as const) };
  },
});
