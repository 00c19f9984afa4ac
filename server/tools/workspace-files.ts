import type { Dirent } from "node:fs";
import { constants as fsConstants } from "node:fs";
import fs, { type FileHandle } from "node:fs/promises";
import path from "node:path";
import ignore, { type Ignore } from "ignore";
import { AppError } from "../errors";
import { fdPath, openWorkspaceDirectory, resolveInWorkspace } from "./workspace-path";

export interface WorkspaceEntry {
  /** Path relative to the workspace root, with `/` separators on every platform. */
  relativePath: string;
  absolutePath: string;
  type: "file" | "dir";
}

export interface WalkOptions {
  /** Directory (relative to the workspace root) to start from; defaults to the root. */
  start?: string;
  /** Also visit files that .gitignore rules exclude. `.git` itself is never visited. */
  includeIgnored?: boolean;
  /** Return false to skip a directory and everything beneath it. */
  enterDir?(relativePath: string): boolean;
  signal?: AbortSignal;
}

interface IgnoreScope {
  /** Directory the rules belong to, relative to the workspace root ("" for the root). */
  base: string;
  rules: Ignore;
}

/**
 * Walks the workspace depth-first in name order, honouring every `.gitignore` on the way (the
 * root's and nested ones, each relative to its own directory, as git does). Symlinks are
 * reported only when they resolve inside the workspace, and linked directories are not entered,
 * so a walk can neither leave the workspace nor loop.
 */
export async function* walkWorkspace(workspaceRoot: string, options: WalkOptions = {}): AsyncGenerator<WorkspaceEntry> {
  const root = await fs.realpath(workspaceRoot);
  const startAbsolute = await resolveInWorkspace(root, options.start ?? ".");
  const startRelative = toPosix(path.relative(root, startAbsolute));
  const startStat = await fs.stat(startAbsolute).catch(() => undefined);
  if (!startStat) throw new AppError("not_found", `No such file or directory in the workspace: ${options.start}`);
  const scopes = options.includeIgnored ? [] : await ancestorScopes(root, startRelative);
  if (startStat.isFile()) {
    if (!isIgnored(scopes, startRelative, false)) {
      yield { relativePath: startRelative, absolutePath: startAbsolute, type: "file" };
    }
    return;
  }
  // The walk holds each directory open and enters children with O_NOFOLLOW through it, so a
  // directory swapped for a symlink mid-walk is never entered.
  const start = await openWorkspaceDirectory(root, startRelative, options.start ?? ".");
  yield* walkDir(root, start.handle, startRelative, scopes, options);
}

async function* walkDir(
  root: string,
  handle: FileHandle,
  dirRelative: string,
  inherited: IgnoreScope[],
  options: WalkOptions,
): AsyncGenerator<WorkspaceEntry> {
  try {
    yield* walkOpenDir(root, handle, dirRelative, inherited, options);
  } finally {
    await handle.close();
  }
}

async function* walkOpenDir(
  root: string,
  handle: FileHandle,
  dirRelative: string,
  inherited: IgnoreScope[],
  options: WalkOptions,
): AsyncGenerator<WorkspaceEntry> {
  options.signal?.throwIfAborted();
  const dirAbsolute = path.join(root, dirRelative);
  let entries: Dirent[];
  try {
    entries = await fs.readdir(fdPath(handle), { withFileTypes: true });
  } catch (error) {
    // A directory that vanished or cannot be read mid-walk is skipped, not fatal.
    if (["ENOENT", "EACCES", "EPERM", "ENOTDIR"].includes((error as NodeJS.ErrnoException).code ?? "")) return;
    throw error;
  }
  const scopes = options.includeIgnored ? inherited : await withOwnGitignore(fdPath(handle), dirRelative, inherited);
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (entry.name === ".git") continue;
    const relativePath = dirRelative ? `${dirRelative}/${entry.name}` : entry.name;
    const absolutePath = path.join(dirAbsolute, entry.name);
    let type: "file" | "dir" | undefined = entry.isDirectory() ? "dir" : entry.isFile() ? "file" : undefined;
    if (entry.isSymbolicLink()) {
      type = await symlinkTargetType(root, relativePath);
      if (type === "dir") {
        // Reported, never entered: the target is walked under its own path if it is in scope.
        if (!isIgnored(scopes, relativePath, true)) yield { relativePath, absolutePath, type };
        continue;
      }
    }
    if (!type) continue;
    if (isIgnored(scopes, relativePath, type === "dir")) continue;
    yield { relativePath, absolutePath, type };
    if (type === "dir" && !entry.isSymbolicLink() && (options.enterDir?.(relativePath) ?? true)) {
      const child = await fs
        .open(fdPath(handle, entry.name), fsConstants.O_RDONLY | fsConstants.O_DIRECTORY | fsConstants.O_NOFOLLOW)
        .catch(() => undefined); // vanished, or swapped for a symlink since it was listed
      if (child) yield* walkDir(root, child, relativePath, scopes, options);
    }
  }
}

async function symlinkTargetType(root: string, relativePath: string): Promise<"file" | "dir" | undefined> {
  try {
    const target = await resolveInWorkspace(root, relativePath);
    const stat = await fs.stat(target);
    return stat.isDirectory() ? "dir" : stat.isFile() ? "file" : undefined;
  } catch {
    return undefined; // points outside the workspace, or dangling
  }
}

/** The .gitignore scopes of the start directory's ancestors, so a walk from `src/` still honours the root's rules. */
async function ancestorScopes(root: string, startRelative: string): Promise<IgnoreScope[]> {
  let scopes: IgnoreScope[] = [];
  const parts = startRelative ? startRelative.split("/") : [];
  // For a file start, its own name is not a directory that could hold a .gitignore; reading fails harmlessly.
  for (let depth = 0; depth < parts.length; depth++) {
    const dirRelative = parts.slice(0, depth).join("/");
    scopes = await withOwnGitignore(path.join(root, dirRelative), dirRelative, scopes);
  }
  return scopes;
}

async function withOwnGitignore(
  dirPath: string,
  dirRelative: string,
  inherited: IgnoreScope[],
): Promise<IgnoreScope[]> {
  const text = await fs.readFile(path.join(dirPath, ".gitignore"), "utf8").catch(() => undefined);
  if (text === undefined) return inherited;
  return [...inherited, { base: dirRelative, rules: ignore().add(text) }];
}

function isIgnored(scopes: IgnoreScope[], relativePath: string, isDir: boolean): boolean {
  // Later (deeper) scopes win, as a nested .gitignore overrides its parents in git.
  for (let i = scopes.length - 1; i >= 0; i--) {
    const scope = scopes[i]!;
    const inner = scope.base ? relativePath.slice(scope.base.length + 1) : relativePath;
    if (!inner) continue;
    const result = scope.rules.test(isDir ? `${inner}/` : inner);
    if (result.ignored) return true;
    if (result.unignored) return false;
  }
  return false;
}

export function toPosix(relativePath: string): string {
  return relativePath.split(path.sep).join("/");
}
