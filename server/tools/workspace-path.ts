import { randomBytes } from "node:crypto";
import { constants as fsConstants } from "node:fs";
import fs, { type FileHandle } from "node:fs/promises";
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

/*
 * Race-free access. Checking a path and then opening it again by name lets a concurrent swap of a
 * directory for a symlink redirect the open outside the workspace. So the helpers below never
 * reuse a checked name: they walk from the workspace root one component at a time, each opened
 * with O_NOFOLLOW through the already-open parent (`/proc/self/fd/<fd>/<name>` names exactly the
 * directory that fd holds, wherever it has moved), and confirm the final descriptor's real path
 * is inside the workspace before any byte is read or written through it.
 */
const { O_RDONLY, O_WRONLY, O_CREAT, O_EXCL, O_NOFOLLOW, O_DIRECTORY } = fsConstants;

/**
 * Whether a workspace-relative path names something in the workspace (a trailing `/` allowed); a
 * path leading out of it, or to nothing, does not. What the plan and task gates ask of a named file.
 */
export async function existsInWorkspace(workspaceRoot: string, relativePath: string): Promise<boolean> {
  try {
    await fs.stat(await resolveInWorkspace(workspaceRoot, relativePath.replace(/\/+$/, "") || "."));
    return true;
  } catch {
    return false;
  }
}

export function fdPath(handle: FileHandle, name?: string): string {
  return name === undefined ? `/proc/self/fd/${handle.fd}` : `/proc/self/fd/${handle.fd}/${name}`;
}

/** An open workspace directory, held by descriptor so later operations inside it cannot be redirected. */
export interface OpenDirectory {
  handle: FileHandle;
  /** Real path of the directory, inside the workspace. */
  realPath: string;
  close(): Promise<void>;
}

/**
 * Opens the real directory `relativeReal` (already resolved by resolveInWorkspace, so it holds no
 * symlinks) component by component. A component that has become a symlink since fails with
 * ELOOP/ENOTDIR and is refused. With `create`, missing directories are made on the way.
 */
export async function openWorkspaceDirectory(
  root: string,
  relativeReal: string,
  displayPath: string,
  options: { create?: boolean } = {},
): Promise<OpenDirectory> {
  const parts = relativeReal.split(path.sep).filter((part) => part && part !== ".");
  let handle = await fs.open(root, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
  try {
    for (const part of parts) {
      const next = fdPath(handle, part);
      if (options.create) {
        await fs.mkdir(next).catch((error: NodeJS.ErrnoException) => {
          if (error.code !== "EEXIST") throw error;
        });
      }
      const child = await fs
        .open(next, O_RDONLY | O_DIRECTORY | O_NOFOLLOW)
        .catch(async (error: NodeJS.ErrnoException) => {
          if (error.code === "ENOTDIR") {
            const isLink = await fs.lstat(next).then(
              (stat) => stat.isSymbolicLink(),
              () => false,
            );
            if (!isLink) throw new AppError("invalid_input", `${displayPath} is not a directory`);
          }
          throw confinementError(error, displayPath);
        });
      await handle.close();
      handle = child;
    }
    const realPath = await verifyDescriptor(root, handle, displayPath);
    const held = handle;
    return { handle: held, realPath, close: () => held.close() };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

/** The descriptor's real path, or a refusal when it lies outside the workspace. */
export async function verifyDescriptor(root: string, handle: FileHandle, displayPath: string): Promise<string> {
  const real = await fs.realpath(fdPath(handle));
  if (!isInside(root, real)) {
    throw new AppError("forbidden", `Path leaves the workspace through a symlink: ${displayPath}`);
  }
  return real;
}

/** Maps an errno from a no-follow open to the error a person should see, without server paths. */
export function confinementError(error: NodeJS.ErrnoException, displayPath: string): Error {
  if (error instanceof AppError) return error;
  switch (error.code) {
    case "ELOOP":
    case "ENOTDIR":
      return new AppError("forbidden", `Path leaves the workspace through a symlink: ${displayPath}`);
    case "ENOENT":
      return new AppError("not_found", `No such file or directory in the workspace: ${displayPath}`);
    case "EISDIR":
      return new AppError("invalid_input", `${displayPath} is a directory`);
    default:
      return new Error(`${displayPath}: ${error.code ?? "error"}`);
  }
}

/** The workspace root's real path and the parent directory + name of a workspace-relative path. */
export async function locateInWorkspace(
  workspaceRoot: string,
  relativePath: string,
): Promise<{ root: string; parentRelative: string; name: string }> {
  const root = await fs.realpath(workspaceRoot);
  const resolved = await resolveInWorkspace(root, relativePath);
  const relative = path.relative(root, resolved);
  if (!relative) throw new AppError("invalid_input", `${relativePath} is the workspace root, not a file`);
  return { root, parentRelative: path.dirname(relative), name: path.basename(relative) };
}

/**
 * A regular file opened for reading with no symlink followed anywhere, verified inside the
 * workspace, and refused when it has other hard links (one could be a file outside the workspace).
 */
export async function openWorkspaceFileForRead(
  workspaceRoot: string,
  relativePath: string,
): Promise<{ handle: FileHandle; size: number; mode: number }> {
  const { root, parentRelative, name } = await locateInWorkspace(workspaceRoot, relativePath);
  const dir = await openWorkspaceDirectory(root, parentRelative, relativePath);
  let handle: FileHandle | undefined;
  try {
    handle = await fs.open(fdPath(dir.handle, name), O_RDONLY | O_NOFOLLOW).catch((error: NodeJS.ErrnoException) => {
      throw confinementError(error, relativePath);
    });
    await verifyDescriptor(root, handle, relativePath);
    const stat = await handle.stat();
    if (stat.isDirectory()) throw new AppError("invalid_input", `${relativePath} is a directory, not a file`);
    if (!stat.isFile()) throw new AppError("invalid_input", `${relativePath} is not a regular file`);
    refuseHardLinked(stat, relativePath);
    return { handle, size: stat.size, mode: stat.mode };
  } catch (error) {
    await handle?.close().catch(() => undefined);
    throw error;
  } finally {
    await dir.close();
  }
}

export function refuseHardLinked(stat: { nlink: number; isFile(): boolean }, displayPath: string): void {
  if (stat.isFile() && stat.nlink > 1) {
    throw new AppError(
      "forbidden",
      `${displayPath} has ${stat.nlink} hard links; a hard-linked file may be a file outside the workspace, so it is not read or written`,
    );
  }
}

/**
 * Replaces (or creates) a file: a temporary file is created with O_EXCL inside the verified parent
 * directory descriptor, written, synced and renamed over the name within that same directory.
 * An existing target must be a regular file with a single link.
 */
export async function writeWorkspaceFile(
  workspaceRoot: string,
  relativePath: string,
  content: string,
  options: { signal?: AbortSignal; mode?: number; createParents?: boolean } = {},
): Promise<void> {
  const { root, parentRelative, name } = await locateInWorkspace(workspaceRoot, relativePath);
  const dir = await openWorkspaceDirectory(root, parentRelative, relativePath, { create: options.createParents });
  const temporaryName = `.${name}.${randomBytes(4).toString("hex")}.tmp`;
  try {
    const existing = await fs.lstat(fdPath(dir.handle, name)).catch(() => undefined);
    if (existing?.isSymbolicLink()) {
      throw new AppError("forbidden", `Path leaves the workspace through a symlink: ${relativePath}`);
    }
    if (existing?.isDirectory()) throw new AppError("invalid_input", `${relativePath} is a directory, not a file`);
    if (existing) refuseHardLinked(existing, relativePath);
    const mode = options.mode ?? (existing ? existing.mode & 0o7777 : 0o666);
    const file = await fs.open(fdPath(dir.handle, temporaryName), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
    try {
      await verifyDescriptor(root, file, relativePath);
      await file.writeFile(content, { encoding: "utf8", signal: options.signal });
      await file.sync();
    } finally {
      await file.close();
    }
    options.signal?.throwIfAborted();
    await fs.rename(fdPath(dir.handle, temporaryName), fdPath(dir.handle, name));
    await verifyDescriptor(root, dir.handle, relativePath);
  } catch (error) {
    await fs.rm(fdPath(dir.handle, temporaryName), { force: true }).catch(() => undefined);
    throw error;
  } finally {
    await dir.close();
  }
}
