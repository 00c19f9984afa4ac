import fs from "node:fs/promises";
import path from "node:path";
import { AppError } from "../errors";

/**
 * Resolves a workspace-relative path and refuses anything that would leave the workspace:
 * absolute paths, `..` segments that climb out, and symlinks that point outside.
 */
export async function resolveInWorkspace(workspaceRoot: string, relativePath: string): Promise<string> {
  if (path.isAbsolute(relativePath)) {
    throw new AppError("forbidden", `Absolute paths are not allowed: ${relativePath}`);
  }
  const root = await fs.realpath(workspaceRoot);
  const candidate = path.resolve(root, relativePath);
  if (!isInside(root, candidate)) {
    throw new AppError("forbidden", `Path leaves the workspace: ${relativePath}`);
  }
  // Resolve symlinks on the longest existing prefix: the target itself may not exist yet.
  let existing = candidate;
  const rest: string[] = [];
  for (;;) {
    try {
      const real = await fs.realpath(existing);
      if (!isInside(root, real)) {
        throw new AppError("forbidden", `Path leaves the workspace through a symlink: ${relativePath}`);
      }
      return path.join(real, ...rest);
    } catch (error) {
      if (error instanceof AppError) throw error;
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
      // A dangling symlink would be followed by a later write, to wherever it points.
      const isLink = await fs.lstat(existing).then(
        (stat) => stat.isSymbolicLink(),
        () => false,
      );
      if (isLink) throw new AppError("forbidden", `Path goes through a dangling symlink: ${relativePath}`);
      rest.unshift(path.basename(existing));
      existing = path.dirname(existing);
    }
  }
}

function isInside(root: string, candidate: string): boolean {
  return candidate === root || candidate.startsWith(root + path.sep);
}
