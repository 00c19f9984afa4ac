import fs from "node:fs/promises";
import path from "node:path";
import { z } from "zod";
import { AppError } from "../errors";
import { asConfigEnv, gitHelperPaths } from "./git-hardening";
import { shellRepositories } from "./git-repositories";
import { launch } from "../launcher/launcher";
import { CappedText, LineSplitter } from "./output-capture";
import { killCommand, waitUntilGone } from "./process-tree";
import { noSandboxReason, sandboxAvailable, systemProgram, UNAPPROVED_WALL_SECONDS } from "./sandbox";
import { analyzeShellCommand, isReadOnlyCommand } from "./shell-read-only";
import { checkWorkspacePaths } from "./shell-workspace-paths";
import { defineTool, type ToolContext } from "./types";
import { resolveInWorkspace } from "./workspace-path";

/**
 * Set for commands run as read-only: git would otherwise refresh the index while it reads
 * (`git status`), a write the sandbox blocks but the differential test would see.
 */
export const READ_ONLY_COMMAND_ENV: Record<string, string> = { GIT_OPTIONAL_LOCKS: "0" };

/** Characters kept per stream in the result: the first and last halves, the middle elided. */
export const SHELL_OUTPUT_LIMIT = 100_000;
/** Lines streamed to the step log per run; the result still holds the (capped) output. */
export const SHELL_LOG_LINE_LIMIT = 2_000;
/**
 * On abort the command is SIGKILLed at once (no grace: see process-tree.ts); this bounds the wait
 * for its processes to be gone before the abort settles — on a loaded machine the kernel takes a
 * moment to tear down a PID namespace.
 */
const STOP_WAIT_MS = 10_000;
/** After the shell exits, how long to wait for pipes held open by leftover children. */
const DRAIN_GRACE_MS = 500;

export interface ShellResult {
  exitCode: number | null;
  /** The signal that ended the shell, if one did. */
  signal: string | null;
  stdout: string;
  stderr: string;
  /** True when stdout or stderr exceeded the limit and their middle was left out. */
  truncated: boolean;
}

/**
 * The rejection of an aborted command, once its processes are gone: `message` is the abort's
 * reason, `stopReport` which processes were killed (recorded with the attempt's outcome).
 */
export class CommandStoppedError extends Error {
  constructor(
    readonly reason: unknown,
    readonly stopReport: string,
  ) {
    super(reason instanceof Error ? reason.message : String(reason));
    this.name = "CommandStoppedError";
  }
}

/** A command that exited with a non-zero status (and the step did not allow that). */
export class ShellCommandError extends Error {
  constructor(
    readonly result: ShellResult,
    message: string,
  ) {
    super(message);
    this.name = "ShellCommandError";
  }
}

export const shellTool = defineTool({
  name: "shell",
  description:
    "Run a bash command in the workspace (or a sub-directory) and return its exit code, stdout and stderr. " +
    "Output lines stream to the step log. A non-zero exit fails the step unless allowFailure is set. " +
    "Commands that only read (ls, cat, grep, find without -delete/-exec, git status/diff/log, …, no writing " +
    "redirections) run without approval; anything else needs approval.",
  inputSchema: z.object({
    command: z
      .string()
      .min(1)
      .refine((command) => command.trim().length > 0, "The command is empty")
      .describe("A bash command line"),
    cwd: z.string().default(".").describe("Directory to run in, relative to the workspace root"),
    allowFailure: z.boolean().default(false).describe("Complete the step even when the command exits non-zero"),
  }),
  outputSchema: z.object({
    exitCode: z.number().nullable(),
    signal: z.string().nullable(),
    stdout: z.string(),
    stderr: z.string(),
    truncated: z.boolean(),
  }),
  capability: "shell.exec",
  capabilityLabel: "Run shell commands",
  readOnly: false,
  destructive: true,
  idempotent: false,
  requiresApproval: true,
  requiresApprovalFor(input) {
    const command = (input as { command?: unknown } | null | undefined)?.command;
    // A `$step` reference or anything else unknown at plan time is gated.
    // Without a sandbox to hold "read-only" to its word, no command runs unasked.
    return typeof command !== "string" || !isReadOnlyCommand(command) || !sandboxAvailable();
  },
  unapprovedRunRefusal(input) {
    const command = (input as { command?: unknown } | null | undefined)?.command;
    // Ungated and not read-only: only a person's waiver does that, and it runs as they decided.
    if (typeof command !== "string" || !isReadOnlyCommand(command) || sandboxAvailable()) return undefined;
    return `This worker cannot confine read-only commands (${noSandboxReason()}), so the command waits for a person's approval`;
  },
  defaultTimeoutSeconds: 300,
  marksEffectStart: true,
  async execute(input, context) {
    const cwd = await resolveInWorkspace(context.workspaceRoot, input.cwd);
    const stat = await fs.stat(cwd).catch(() => undefined);
    if (!stat?.isDirectory()) throw new AppError("invalid_input", `Not a directory in the workspace: ${input.cwd}`);
    // Any git the command starts ignores programs the workspace's git configuration names.
    // …of every repository the command can reach from anywhere in the workspace.
    const repositories = await shellRepositories(context.workspaceRoot, context.approvedByPerson);
    const gitEnv = asConfigEnv(repositories.overrides);
    const readOnly = isReadOnlyCommand(input.command);
    // Unapproved, a read-only command is only as safe as its confinement: without one here it
    // does not run (the engine already sent such a step to a person; this is the last word).
    if (readOnly && !sandboxAvailable() && !context.approvedByPerson)
      throw new AppError("forbidden", `Not run without approval: ${noSandboxReason()}`);
    // A command judged read-only ran without approval: the sandbox makes sure it stays read-only.
    const confine =
      readOnly && sandboxAvailable()
        ? {
            workspace: await fs.realpath(context.workspaceRoot),
            // An agent task's worktree: its git directory lies in the main repository's.
            readOnlyPaths: [...gitHelperPaths(), ...repositories.linkedGitDirs],
            // A short wall time for what nobody approved; an approved step has its own timeout.
            ...(!context.approvedByPerson && { wallSeconds: UNAPPROVED_WALL_SECONDS }),
          }
        : undefined;
    // What the command names must also stay inside now, as the workspace is (symlinks, devices).
    const escape = confine && (await checkWorkspacePaths(input.command, context.workspaceRoot, cwd));
    if (escape) throw new AppError("forbidden", `Refused as a read-only command: ${escape}`);
    await context.effectsStarting();
    const result = await runShell(
      input.command,
      cwd,
      context,
      confine ? { ...gitEnv, ...READ_ONLY_COMMAND_ENV } : gitEnv,
      confine,
    );
    if (result.exitCode !== 0 && !input.allowFailure) {
      const how = result.exitCode === null ? `was killed by ${result.signal}` : `exited with code ${result.exitCode}`;
      const tail = lastLines(result.stderr || result.stdout, 5);
      throw new ShellCommandError(result, `The command ${how}${tail ? `:\n${tail}` : ""}`);
    }
    return result;
  },
});

/**
 * Seed 002's read-only bash for planning: the deep planner may look around with commands the
 * analysis judges read-only, always inside the sandbox; anything else is refused with the reason,
 * not asked about (planning never waits for an approval). Offered only where a sandbox works.
 */
export const readOnlyShellTool = defineTool({
  name: "shell_read",
  description:
    "Run a read-only bash command in the workspace (ls, cat, grep, find, head, wc, tree, git status/log/diff…) " +
    "and return its exit code and output. Commands that write or run other programs are refused.",
  inputSchema: z.object({
    command: z.string().min(1).describe("A read-only bash command line"),
  }),
  outputSchema: shellTool.outputSchema,
  capability: "shell.read",
  capabilityLabel: "Run read-only commands",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 60,
  async execute(input, context) {
    const verdict = analyzeShellCommand(input.command);
    if (!verdict.readOnly) throw new AppError("forbidden", `Blocked while planning: ${verdict.reason}`);
    if (!sandboxAvailable())
      throw new AppError("forbidden", "No sandbox is available, so no command runs while planning");
    const workspace = await fs.realpath(context.workspaceRoot);
    const escape = await checkWorkspacePaths(input.command, workspace, workspace);
    if (escape) throw new AppError("forbidden", `Blocked while planning: ${escape}`);
    const repositories = await shellRepositories(workspace);
    const gitEnv = asConfigEnv(repositories.overrides);
    return runShell(
      input.command,
      workspace,
      context,
      { ...gitEnv, ...READ_ONLY_COMMAND_ENV },
      {
        workspace,
        readOnlyPaths: [...gitHelperPaths(), ...repositories.linkedGitDirs],
        wallSeconds: UNAPPROVED_WALL_SECONDS,
      },
    );
  },
});

/**
 * Kills process group `$1` when its stdin reaches end of file without the word "done": the
 * worker holds the other end, so a worker that dies (even by SIGKILL, when no handler of ours
 * runs) takes the command's whole group with it. A pipe closes however its holder dies; it needs
 * no polling and no help from the kernel's parent-death signal, which reaches one process only.
 */
const GROUP_WATCHDOG = 'read -r word; [ "$word" = done ] || kill -KILL -- "-$1" 2>/dev/null; exit 0';

/**
 * Runs `bash -c` in its own process group, so that on abort (timeout, cancellation, shutdown) the
 * whole group — pipelines, children, grandchildren — and its PID namespace are SIGKILLed at once,
 * not only the shell; the abort rejects (CommandStoppedError) only once they are gone. The command
 * also dies with its worker: the shell itself by the parent-death signal (`setpriv --pdeathsig`),
 * and whatever it started by a watchdog that kills the group once the worker's end of its pipe
 * closes. Without this a SIGKILLed worker's command runs on unseen while recovery may start it
 * again elsewhere. A descendant that left the group (`setsid`) still ends with the step: the
 * command runs in a PID namespace of its own (`unshare`, see PID_NAMESPACE; the sandboxed path
 * has bubblewrap's), which the kernel empties when its first process ends.
 */
export function runShell(
  command: string,
  cwd: string,
  context: ToolContext,
  extraEnv: Record<string, string> = {},
  /** Run inside the read-only sandbox (server/tools/sandbox.ts), with only `extraEnv` set. */
  confine?: { workspace: string; readOnlyPaths?: string[]; wallSeconds?: number },
): Promise<ShellResult> {
  context.signal.throwIfAborted();
  return new Promise<ShellResult>((resolve, reject) => {
    const child = launchShell(command, cwd, extraEnv, confine);
    const watchdog = child.pid === undefined ? undefined : startGroupWatchdog(child.pid);
    const stdout = new CappedText(SHELL_OUTPUT_LIMIT);
    const stderr = new CappedText(SHELL_OUTPUT_LIMIT);
    const lines = new LineSplitter<"stdout" | "stderr">(
      SHELL_LOG_LINE_LIMIT,
      (stream, line) => context.log(line, stream === "stderr" ? "warn" : "info"),
      () => context.log(`… output beyond ${SHELL_LOG_LINE_LIMIT} lines is not streamed; the result keeps it`, "warn"),
    );
    let exit: { code: number | null; signal: string | null } | undefined;
    let settled = false;
    let drainTimer: NodeJS.Timeout | undefined;

    const killGroup = (signal: NodeJS.Signals) => {
      try {
        process.kill(-child.pid!, signal);
      } catch {
        // The group is already gone.
      }
    };
    const exited = new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) resolve();
      child.once("exit", () => resolve());
      child.once("error", () => resolve());
    });
    // Stopping is immediate and total: every process of the command is SIGKILLed in one go (the
    // shell, PID 1 of its namespace, would ignore SIGTERM and run its next command), and the abort
    // settles only once they are gone, so a retry or takeover never runs beside this attempt.
    let stopping = false;
    const onAbort = () => {
      if (settled || stopping || child.pid === undefined) return;
      stopping = true;
      const killed = killCommand(child.pid);
      void (async () => {
        const deadline = Date.now() + STOP_WAIT_MS;
        const survivors = await waitUntilGone(killed, STOP_WAIT_MS);
        await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, Math.max(0, deadline - Date.now())))]);
        const report =
          `stopped: killed ${killed.length} process${killed.length === 1 ? "" : "es"}` +
          (killed.length > 0 ? ` (pids ${killed.join(", ")})` : "") +
          (survivors.length > 0 ? `; still running after ${STOP_WAIT_MS / 1000} s: ${survivors.join(", ")}` : "");
        context.log(report, survivors.length > 0 ? "error" : "warn");
        finish(new CommandStoppedError(context.signal.reason, report), survivors.length > 0);
      })();
    };
    const finish = (error?: Error, keepWatchdog = false) => {
      if (settled) return;
      settled = true;
      context.signal.removeEventListener("abort", onAbort);
      // A process that outlived its SIGKILL (uninterruptible sleep) still dies with the worker.
      if (!keepWatchdog) watchdog?.release();
      clearTimeout(drainTimer);
      lines.flush();
      if (error) return reject(error);
      if (context.signal.aborted) return reject(context.signal.reason);
      resolve({
        exitCode: exit?.code ?? null,
        signal: exit?.signal ?? null,
        stdout: stdout.text(),
        stderr: stderr.text(),
        truncated: stdout.truncated || stderr.truncated,
      });
    };

    context.signal.addEventListener("abort", onAbort, { once: true });
    child.stdout!.setEncoding("utf8").on("data", (chunk: string) => {
      stdout.append(chunk);
      lines.append("stdout", chunk);
    });
    child.stderr!.setEncoding("utf8").on("data", (chunk: string) => {
      stderr.append(chunk);
      lines.append("stderr", chunk);
    });
    child.on("error", (error: NodeJS.ErrnoException) =>
      finish(error.code === "ENOENT" ? new Error("bash was not found on this machine's PATH") : error),
    );
    child.on("exit", (code, signal) => {
      exit = { code, signal };
      // Being stopped: the abort settles once every process is gone, not when the pipes close.
      if (stopping) return;
      // A background child may keep the pipes open; the step ends with its shell, so stop it.
      drainTimer = setTimeout(() => {
        killGroup("SIGKILL");
        finish();
      }, DRAIN_GRACE_MS);
    });
    child.on("close", () => {
      if (!stopping) finish();
    });
  });
}

/** `bash -c command` in a process group of its own: confined in the sandbox, or as approved. */
function launchShell(
  command: string,
  cwd: string,
  extraEnv: Record<string, string>,
  confine: { workspace: string; readOnlyPaths?: string[]; wallSeconds?: number } | undefined,
) {
  const bash = [systemProgram("bash") ?? "/bin/bash", "--noprofile", "--norc", "-c", command];
  // Confined: as uid 65534 without capabilities, under limits, in the sandbox's own PID
  // namespace. Otherwise exactly the approved command, in a PID namespace of its own, so every
  // descendant (setsid ones too) ends with the step (server/tools/launcher.ts).
  return launch(
    confine
      ? {
          kind: "sandbox",
          argv: bash,
          sandbox: {
            workspace: confine.workspace,
            cwd,
            readOnlyPaths: confine.readOnlyPaths,
            wallSeconds: confine.wallSeconds,
          },
        }
      : {
          kind: "approved",
          argv: bash,
          // The engine ran this step past its gate: every command not judged read-only has one.
          approvedByPerson: true,
          why: "a shell command that is not read-only",
        },
    {
      cwd,
      env: confine ? extraEnv : { ...shellEnvironment(process.env), ...extraEnv },
      stdio: ["ignore", "pipe", "pipe"],
      detached: true,
      containLifetime: true,
    },
  );
}

/** A watchdog over one process group (see GROUP_WATCHDOG); `release` lets it go quietly. */
function startGroupWatchdog(pgid: number): { release(): void } {
  const env: Record<string, string> = { PATH: process.env.PATH ?? "/usr/bin:/bin" };
  const watchdog = launch(
    {
      kind: "helper",
      argv: ["bash", "--noprofile", "--norc", "-c", GROUP_WATCHDOG, "stepwise-watchdog", String(pgid)],
      why: "it signals the step's process group",
    },
    {
      env,
      stdio: ["pipe", "ignore", "ignore"],
      // Its own group: a signal to the command's group or the worker's must not take it first.
      detached: true,
    },
  );
  watchdog.on("error", () => undefined);
  watchdog.stdin!.on("error", () => undefined);
  watchdog.unref();
  let released = false;
  return {
    release() {
      if (released) return;
      released = true;
      watchdog.stdin!.end("done\n");
    },
  };
}

/**
 * The worker's environment without what could subvert the command or leak Stepwise's own
 * secrets to an unapproved read-only command: startup files bash would source (BASH_ENV, ENV),
 * exported functions that could shadow `ls`, relative PATH entries, credentials and settings.
 */
export function shellEnvironment(source: Record<string, string | undefined>): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [name, value] of Object.entries(source)) {
    if (value === undefined) continue;
    if (name === "BASH_ENV" || name === "ENV" || name.startsWith("BASH_FUNC_")) continue;
    if (/^(STEPWISE_|DATABASE_URL$|PG(PASSWORD|USER|HOST|DATABASE)$)|_API_KEY$|_TOKEN$|SECRET|PASSWORD/i.test(name))
      continue;
    env[name] = value;
  }
  env.PATH = (source.PATH ?? "")
    .split(path.delimiter)
    .filter((entry) => path.isAbsolute(entry))
    .join(path.delimiter);
  env.GIT_TERMINAL_PROMPT = "0";
  return env;
}

function lastLines(text: string, count: number): string {
  return text.trimEnd().split("\n").slice(-count).join("\n");
}
