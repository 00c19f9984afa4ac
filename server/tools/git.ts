import { execFile, spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { z } from "zod";
import { AppError } from "../errors";
import { asConfigArgs, gitHelperPaths, gitOverrides, HARDENED_GIT_ENV } from "./git-hardening";
import { sandboxAvailable, sandboxed } from "./sandbox";
import { shellEnvironment } from "./shell";
import { resolveInWorkspace } from "./workspace-path";

/** Characters of git output kept; beyond this the output is cut and `truncated` set. */
/** What git_status, git_diff and git_log share: they only read the repository. */
export const GIT_READ_METADATA = {
  capability: "git.read",
  capabilityLabel: "Read git state",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 60,
} as const;

export const GIT_OUTPUT_LIMIT = 200_000;

export interface GitOutput {
  stdout: string;
  stderr: string;
  exitCode: number;
  truncated: boolean;
}

export interface GitOptions {
  cwd: string;
  signal: AbortSignal;
  /** Read-only commands skip git's optional index refresh, so they never take the index lock. */
  readOnly?: boolean;
  env?: Record<string, string>;
  /** Exit codes that are answers rather than failures (e.g. 1 for `diff --quiet`). */
  okExitCodes?: number[];
}

/** A git command that failed; the message carries git's own explanation. */
export class GitCommandError extends Error {
  constructor(
    readonly args: string[],
    readonly output: GitOutput,
  ) {
    super(`git ${args[0] ?? ""} failed (exit ${output.exitCode}): ${output.stderr.trim() || output.stdout.trim()}`);
    this.name = "GitCommandError";
  }
}

/**
 * Runs git with an argument array (never through a shell), with pathspecs taken literally so a
 * path like `:(top)` cannot widen the scope beyond the workspace.
 */
export async function runGit(args: string[], options: GitOptions): Promise<GitOutput> {
  options.signal.throwIfAborted();
  // The server's environment without its secrets, and the repository's programs disarmed.
  const baseEnv = shellEnvironment(process.env) as NodeJS.ProcessEnv;
  const overrides = await gitOverrides(options.cwd, baseEnv);
  const argv = ["git", "--literal-pathspecs", "--no-pager", ...asConfigArgs(overrides), ...args];
  const env: Record<string, string> = {
    ...(options.env ?? {}),
    ...HARDENED_GIT_ENV,
    LC_ALL: "C",
    ...(options.readOnly && { GIT_OPTIONAL_LOCKS: "0" }),
  };
  // Reading git runs in the read-only sandbox too, with the repository (which may lie above the
  // workspace) and its git directories mounted read-only; writing git (commit) was approved.
  const confined = options.readOnly && sandboxAvailable();
  const { command, args: spawnArgs } = confined
    ? sandboxed(argv, {
        workspace: options.cwd,
        cwd: options.cwd,
        env,
        readOnlyPaths: [...(await repositoryMounts(options.cwd, overrides)), ...gitHelperPaths()],
      })
    : { command: argv[0]!, args: argv.slice(1) };
  return new Promise<GitOutput>((resolve, reject) => {
    const child = spawn(command, spawnArgs, {
      cwd: options.cwd,
      signal: options.signal,
      stdio: ["ignore", "pipe", "pipe"],
      env: (confined ? {} : { ...baseEnv, ...env }) as NodeJS.ProcessEnv,
    });
    let stdout = "";
    let stderr = "";
    let truncated = false;
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      if (stdout.length >= GIT_OUTPUT_LIMIT) {
        truncated = true;
        return;
      }
      stdout += chunk;
      if (stdout.length > GIT_OUTPUT_LIMIT) {
        stdout = stdout.slice(0, GIT_OUTPUT_LIMIT);
        truncated = true;
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      if (stderr.length < 20_000) stderr += chunk;
    });
    child.on("error", (error: NodeJS.ErrnoException) => {
      if (options.signal.aborted) return reject(options.signal.reason);
      reject(error.code === "ENOENT" ? new Error("git was not found on this machine's PATH") : error);
    });
    child.on("close", (code) => {
      if (options.signal.aborted) return reject(options.signal.reason);
      const output = { stdout, stderr, exitCode: code ?? -1, truncated };
      if (code === 0 || (code !== null && options.okExitCodes?.includes(code))) resolve(output);
      else reject(new GitCommandError(args, output));
    });
  });
}

/**
 * The directories a sandboxed git needs besides the workspace: the repository's top level, its
 * git directory and the common one (worktrees keep them apart). Asked of git itself, hardened.
 */
function repositoryMounts(cwd: string, overrides: [string, string][]): Promise<string[]> {
  return new Promise((resolve) => {
    execFile(
      "git",
      [...asConfigArgs(overrides), "rev-parse", "--show-toplevel", "--absolute-git-dir", "--git-common-dir"],
      { cwd, env: { ...(shellEnvironment(process.env) as NodeJS.ProcessEnv), ...HARDENED_GIT_ENV }, timeout: 10_000 },
      (error, stdout) => {
        if (error) return resolve([]); // not a repository: git will say so itself
        const dirs = String(stdout)
          .split("\n")
          .map((line) => line.trim())
          .filter(Boolean)
          .map((dir) => path.resolve(cwd, dir))
          .filter((dir) => fs.existsSync(dir) && dir !== cwd && !dir.startsWith(`${cwd}/`));
        resolve([...new Set(dirs)]);
      },
    );
  });
}

export interface Repository {
  /** The workspace root (real path); git runs here. */
  cwd: string;
  /** The workspace's path inside the repository, with a trailing `/` ("" when it is the top level). */
  prefix: string;
}

/** Finds the repository the workspace belongs to, or says clearly that there is none. */
export async function openRepository(workspaceRoot: string, signal: AbortSignal): Promise<Repository> {
  const cwd = await resolveInWorkspace(workspaceRoot, ".");
  try {
    const { stdout } = await runGit(["rev-parse", "--show-prefix"], { cwd, signal, readOnly: true });
    return { cwd, prefix: stdout.trim() };
  } catch (error) {
    if (error instanceof GitCommandError && /not a git repository/i.test(error.output.stderr)) {
      throw new AppError("invalid_input", "The workspace is not inside a git repository");
    }
    throw error;
  }
}

/** Turns workspace-relative paths into pathspecs relative to the workspace, refusing any that leave it. */
export async function workspacePathspecs(workspaceRoot: string, paths: string[]): Promise<string[]> {
  const root = await resolveInWorkspace(workspaceRoot, ".");
  const specs: string[] = [];
  for (const relative of paths) {
    const absolute = await resolveInWorkspace(root, relative);
    specs.push(path.relative(root, absolute).split(path.sep).join("/") || ".");
  }
  return specs.length > 0 ? specs : ["."];
}

/** Strips the workspace's prefix from a repository-relative path. */
export function toWorkspacePath(repository: Repository, repoPath: string): string {
  return repository.prefix && repoPath.startsWith(repository.prefix)
    ? repoPath.slice(repository.prefix.length)
    : repoPath;
}

/**
 * A revision argument: refused when it could be read as an option. Callers still pass
 * `--end-of-options` before revisions where git accepts it.
 */
export const revisionSchema = z
  .string()
  .min(1)
  .max(200)
  .regex(/^[^-\s\0][^\s\0]*$/, "A revision such as HEAD, main, v1.2 or a commit hash (no spaces, not starting with -)");
