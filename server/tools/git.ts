import path from "node:path";
import { z } from "zod";
import { AppError, hasKind, markKind } from "../errors";
import { asConfigEnv, gitHelperPaths, gitProgram } from "./git-hardening";
import { inspectRepositories } from "./git-repositories";
import type { CollectedOutput } from "../launcher/forker";
import { launchForOutput, LaunchRefused } from "../launcher/launcher";
import { noSandboxReason, SANDBOX_LIMITS, sandboxAvailable, systemProgram, UNAPPROVED_WALL_SECONDS } from "./sandbox";
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
  // They run unapproved only confined: without a sandbox a person approves each.
  requiresApprovalFor: () => !sandboxAvailable(),
  unapprovedRunRefusal: () =>
    sandboxAvailable()
      ? undefined
      : `This worker cannot confine git (${noSandboxReason()}), so it waits for a person's approval`,
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
  /** The repository as `openRepository` checked it: its overrides and what may be mounted. */
  repository: Repository;
  /** Read-only commands skip git's optional index refresh, so they never take the index lock. */
  readOnly?: boolean;
  /**
   * A person approved the step. Git runs in the sandbox wherever one exists, approved or not (a
   * person approving "commit all" did not approve the filters a repository names); only without a
   * sandbox does an approved step's git run unconfined, exactly as given.
   */
  approved?: boolean;
  env?: Record<string, string>;
  /** Exit codes that are answers rather than failures (e.g. 1 for `diff --quiet`). */
  okExitCodes?: number[];
}

/** A git command that failed; the message carries git's own explanation. */
export class GitCommandError extends Error {
  // Thrown by the app context's services, caught by either copy of the agents' code (see markKind).
  static [Symbol.hasInstance](value: unknown): boolean {
    return hasKind(value, "GitCommandError");
  }

  constructor(
    readonly args: string[],
    readonly output: GitOutput,
  ) {
    super(`git ${args[0] ?? ""} failed (exit ${output.exitCode}): ${output.stderr.trim() || output.stdout.trim()}`);
    this.name = "GitCommandError";
    markKind(this, "GitCommandError");
  }
}

/** A write (commit, worktree, merge) may produce pack files far beyond a read's file-size limit. */
const WRITE_FILE_SIZE_BYTES = 4 * 1024 ** 3;

/**
 * Runs git (by its absolute path, with an argument array, never through a shell), with pathspecs
 * taken literally so a path like `:(top)` cannot widen the scope beyond the workspace. The
 * overrides travel as GIT_CONFIG_COUNT/KEY_n/VALUE_n: as `-c key=value`, a driver named `a=b`
 * would be split at its first `=` and escape them.
 *
 * Every git runs through the launcher, in the sandbox: reading with the repository mounted
 * read-only, writing (`readOnly` unset) with the repository — the workspace, and for git_commit an
 * enclosing repository's directories — mounted writable and nothing else. Repository configuration
 * naming a file outside those mounts (`include.path`) then finds nothing there, and whatever
 * program a repository still names runs confined too.
 */
export async function runGit(args: string[], options: GitOptions): Promise<GitOutput> {
  return launchGit([gitProgram(), "--literal-pathspecs", "--no-pager", ...args], args, options);
}

/**
 * A fixed script of several git commands in one launch (one sandbox instead of one per git: each
 * costs tens of milliseconds). Bash without profile or rc files runs `script` with `$1` the
 * absolute path of git and `args` after it, never interpolated into the script. Every git it
 * starts gets exactly what `runGit` gives one: the same environment (the hardened configuration
 * and the repository's overrides as GIT_CONFIG_COUNT/KEY_n/VALUE_n, inherited by each), the same
 * sandbox and mounts; the script passes `--literal-pathspecs --no-pager` to each as runGit does.
 * `name` stands for the script in errors.
 */
export async function runGitScript(
  name: string,
  script: string,
  args: string[],
  options: GitOptions,
): Promise<GitOutput> {
  const bash = systemProgram("bash") ?? "/bin/bash";
  const argv = [bash, "--noprofile", "--norc", "-c", script, `stepwise-${name}`, gitProgram(), ...args];
  return launchGit(argv, [name], options);
}

async function launchGit(argv: string[], args: string[], options: GitOptions): Promise<GitOutput> {
  options.signal.throwIfAborted();
  const { repository } = options;
  const env: Record<string, string> = {
    ...(options.env ?? {}),
    ...asConfigEnv(repository.overrides),
    LC_ALL: "C",
    // git never looks for a repository above the workspace (the enclosing one, if allowed, is
    // found through the workspace's own `.git`).
    ...(repository.contained && { GIT_CEILING_DIRECTORIES: path.dirname(repository.cwd) }),
    ...(options.readOnly && { GIT_OPTIONAL_LOCKS: "0" }),
  };
  const confined = sandboxAvailable();
  if (!confined && !options.approved) {
    throw new AppError("forbidden", `Not run without approval: ${noSandboxReason()}`);
  }
  const writes = !options.readOnly;
  let running: Promise<CollectedOutput>;
  try {
    running = launchForOutput(
      confined
        ? {
            kind: "sandbox",
            argv,
            sandbox: {
              workspace: repository.cwd,
              cwd: options.cwd,
              // Bounded here: at most GIT_OUTPUT_LIMIT of stdout and 20,000 characters of stderr are kept.
              outputBoundBy: "caller",
              readOnlyPaths: [...(writes ? [] : repository.outsideMounts), ...gitHelperPaths()],
              ...(writes && {
                writablePaths: [repository.cwd, ...repository.outsideMounts],
                limits: { fileSizeBytes: WRITE_FILE_SIZE_BYTES },
              }),
              // Reading nobody approved gets a short wall time; the rest their caller's signal.
              ...(!options.approved && !writes && { wallSeconds: UNAPPROVED_WALL_SECONDS }),
            },
          }
        : { kind: "approved", argv, approvedByPerson: options.approved, why: noSandboxReason() },
      {
        cwd: options.cwd,
        env: confined ? env : { ...shellEnvironment(process.env), ...env },
        signal: options.signal,
        // The sandbox's own cap is off for git (`outputBoundBy: "caller"`): past it, the pipe
        // closes and git fails to write on, as it did when `head -c` closed it inside the sandbox.
        output: {
          stdoutBytes: GIT_OUTPUT_LIMIT * 4, // UTF-8: at most 4 bytes a character
          stderrBytes: 80_000,
          closeAfterBytes: SANDBOX_LIMITS.outputBytes,
        },
      },
    );
  } catch (error) {
    if (error instanceof LaunchRefused) throw new AppError("forbidden", error.message);
    throw error;
  }
  const result = await running;
  let stdout = result.stdout.toString("utf8");
  const truncated = result.stdoutTruncated || stdout.length > GIT_OUTPUT_LIMIT;
  stdout = stdout.slice(0, GIT_OUTPUT_LIMIT);
  const output = {
    stdout,
    stderr: result.stderr.toString("utf8").slice(0, 20_000),
    exitCode: result.exitCode ?? -1,
    truncated,
  };
  const code = result.exitCode;
  if (code === 0 || (code !== null && options.okExitCodes?.includes(code))) return output;
  throw new GitCommandError(args, output);
}

export interface Repository {
  /** The workspace root (real path); git runs here. */
  cwd: string;
  /** The workspace's path inside the repository, with a trailing `/` ("" when it is the top level). */
  prefix: string;
  /** Overrides for every repository reachable from the workspace. */
  overrides: [string, string][];
  /** Whether everything git may use was checked to lie inside the workspace. */
  contained: boolean;
  /** Directories outside the workspace git needs (only when not contained). */
  outsideMounts: string[];
}

/**
 * Finds the repository the workspace belongs to, or says clearly that there is none. For the
 * read-only tools (`contained`), the repository's git directory, common directory, worktree,
 * alternates and every nested repository or submodule must lie inside the workspace, or the step
 * is refused with the reason; git_commit, which a person approved, may commit to a repository
 * enclosing the workspace.
 */
export async function openRepository(
  workspaceRoot: string,
  signal: AbortSignal,
  options: { contained?: boolean; approved?: boolean } = {},
): Promise<Repository> {
  const contained = options.contained ?? true;
  const cwd = await resolveInWorkspace(workspaceRoot, ".");
  const scan = await inspectRepositories(cwd, {
    enclosing: contained ? "refuse" : "allow",
    approved: options.approved,
  });
  if (scan.refusal) throw new AppError("forbidden", scan.refusal);
  const repository: Repository = {
    cwd,
    prefix: "",
    overrides: scan.overrides,
    contained,
    outsideMounts: scan.outsideMounts,
  };
  try {
    const { stdout } = await runGit(["rev-parse", "--show-prefix"], {
      cwd,
      signal,
      repository,
      readOnly: true,
      approved: options.approved,
    });
    return { ...repository, prefix: stdout.trim() };
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
