import fs from "node:fs";
import path from "node:path";
import { commandCgroup } from "./sandbox-cgroups";

/** How one command is wrapped to run inside the sandbox (see sandbox.ts): bwrap's mounts and namespaces, then the limits. */

const SYSTEM_DIRS = ["/usr", "/etc/alternatives", "/etc/ssl/certs"];

/**
 * Where Stepwise looks for the programs it runs itself: fixed system directories only, never PATH,
 * whose entries a workspace, a step or the environment could make point at a program of theirs.
 */
export const SYSTEM_PROGRAM_DIRS = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];

const programs = new Map<string, string | undefined>();

/** The absolute path of a system program (`git`, `bwrap`…), found once in SYSTEM_PROGRAM_DIRS. */
export function systemProgram(name: string): string | undefined {
  if (!programs.has(name)) {
    const found = SYSTEM_PROGRAM_DIRS.map((dir) => path.join(dir, name)).find((candidate) => {
      try {
        fs.accessSync(candidate, fs.constants.X_OK);
        return fs.statSync(candidate).isFile();
      } catch {
        return false;
      }
    });
    programs.set(name, found);
  }
  return programs.get(name);
}

/** The uid and gid commands run as inside the sandbox ("nobody"). */
export const SANDBOX_UID = 65534;

export interface SandboxLimits {
  /** RLIMIT_CPU, per process, of an unapproved command (one with a wall time). */
  cpuSeconds: number;
  /** RLIMIT_AS: memory a process can map. */
  addressSpaceBytes: number;
  /** Processes (and threads) at once: RLIMIT_NPROC, and the cgroup's pids.max where writable. */
  processes: number;
  /** RLIMIT_FSIZE: the largest file a process may write (the private /tmp is the only writable place). */
  fileSizeBytes: number;
  /** RLIMIT_NOFILE. */
  openFiles: number;
  /** Bytes kept per output stream; the command gets SIGPIPE when it writes beyond them. */
  outputBytes: number;
}

export const SANDBOX_LIMITS: SandboxLimits = {
  cpuSeconds: 60,
  addressSpaceBytes: 4 * 1024 ** 3,
  processes: 256,
  fileSizeBytes: 64 * 1024 ** 2,
  openFiles: 1024,
  outputBytes: 16 * 1024 ** 2,
};

/** RLIMIT_CPU of an approved confined command, whose step's own timeout bounds it. */
const APPROVED_CPU_SECONDS = 3600;

/** Wall time of a command that runs without a person's approval (read-only shell, read-only git). */
export const UNAPPROVED_WALL_SECONDS = 60;

export interface SandboxOptions {
  /** Mounted read-only at its own path. */
  workspace: string;
  /** Where the command starts (inside the workspace). */
  cwd: string;
  /** The whole environment the command sees. */
  env: Record<string, string>;
  /** More host paths to mount read-only (e.g. Stepwise's own helper programs). */
  readOnlyPaths?: string[];
  /**
   * Paths mounted read-write (the workspace itself may be one): only what the operation must write,
   * e.g. a repository and its git directory for a commit. The sandbox's uid 65534 is mapped to
   * Stepwise's own uid, so it can write what Stepwise owns there — and nothing it does not, since
   * it holds no capability (see docs/decisions.md, "Writing git runs confined").
   */
  writablePaths?: string[];
  /** Ends the command after this many seconds (SIGTERM, SIGKILL 2 s later); none when unset. */
  wallSeconds?: number;
  /**
   * "caller": the caller reads the output through pipes and keeps at most a bounded amount of it
   * (runGit), so no cap runs inside the sandbox — it costs a shell and four programs per launch,
   * a third of a git's launch. Default "sandbox": each stream capped at `limits.outputBytes` there.
   */
  outputBoundBy?: "sandbox" | "caller";
  limits?: Partial<SandboxLimits>;
}

/**
 * Caps each output stream at `$1` bytes without losing the end of what fits: the command's stdout
 * and stderr each go through `head -c` (unbuffered by `stdbuf`, so lines stream as they come),
 * and bash waits for the whole pipeline, so nothing is cut
 * short when the sandbox is torn down. pipefail keeps the command's own exit status (141, SIGPIPE,
 * when it was cut off).
 */
const OUTPUT_CAP =
  'n=$1; stdbuf=$2; head=$3; shift 3; set -o pipefail; { "$@" 2>&1 1>&3 3>&- | "$stdbuf" -o0 "$head" -c "$n" 1>&2; } 3>&1 | "$stdbuf" -o0 "$head" -c "$n"';

/** bwrap's arguments up to (not including) the command to run. */
export function sandboxArgs(options: SandboxOptions): string[] {
  const args: string[] = [];
  // The host's system folders, probed at run time: not files of the app, so Turbopack must not
  // trace them (without the comments it shipped the whole project as server code).
  for (const dir of SYSTEM_DIRS) if (fs.existsSync(/*turbopackIgnore: true*/ dir)) args.push("--ro-bind", dir, dir);
  // Merged-/usr systems: /bin, /lib… are links into /usr.
  for (const link of ["bin", "lib", "lib64", "sbin"]) {
    const target = `/${link}`;
    if (!fs.existsSync(/*turbopackIgnore: true*/ target)) continue;
    if (fs.lstatSync(target).isSymbolicLink()) args.push("--symlink", fs.readlinkSync(target), target);
    else args.push("--ro-bind", target, target);
  }
  // /tmp first: a workspace under /tmp is then mounted on top of the private /tmp.
  args.push("--tmpfs", "/tmp", "--proc", "/proc", "--dev", "/dev");
  args.push("--ro-bind", options.workspace, options.workspace);
  for (const extra of options.readOnlyPaths ?? []) args.push("--ro-bind", extra, extra);
  // Last: a writable path inside the workspace is mounted over its read-only view.
  for (const writable of options.writablePaths ?? []) args.push("--bind", writable, writable);
  args.push(
    "--unshare-all",
    // Required, not "try": without its own user namespace the command would keep root's identity.
    "--unshare-user",
    "--uid",
    String(SANDBOX_UID),
    "--gid",
    String(SANDBOX_UID),
    "--cap-drop",
    "ALL",
    "--die-with-parent",
    "--new-session",
    "--clearenv",
  );
  for (const [name, value] of Object.entries({ ...minimalEnv(), ...options.env })) args.push("--setenv", name, value);
  args.push("--chdir", options.cwd);
  return args;
}

/** The limits, then the command: what bwrap runs inside the namespaces. */
function limitedCommand(argv: string[], options: SandboxOptions): string[] {
  const limits = { ...SANDBOX_LIMITS, ...options.limits };
  const prlimit = systemProgram("prlimit") ?? "prlimit";
  const bash = systemProgram("bash") ?? "/bin/bash";
  const stdbuf = systemProgram("stdbuf") ?? "/usr/bin/stdbuf";
  const head = systemProgram("head") ?? "/usr/bin/head";
  const timeout = systemProgram("timeout") ?? "/usr/bin/timeout";
  // Soft and hard limit alike: without CAP_SYS_RESOURCE the command cannot raise either.
  const limit = (name: string, value: number) => `--${name}=${value}:${value}`;
  return [
    prlimit,
    // An approved command (no wall time of ours) is bounded by its step's timeout instead.
    limit("cpu", options.wallSeconds ? limits.cpuSeconds : Math.max(limits.cpuSeconds, APPROVED_CPU_SECONDS)),
    limit("as", limits.addressSpaceBytes),
    limit("nproc", limits.processes),
    limit("fsize", limits.fileSizeBytes),
    limit("nofile", limits.openFiles),
    limit("core", 0),
    "--",
    ...(options.wallSeconds ? [timeout, "--kill-after=2", String(options.wallSeconds)] : []),
    ...(options.outputBoundBy === "caller"
      ? []
      : [
          bash,
          "--noprofile",
          "--norc",
          "-c",
          OUTPUT_CAP,
          "stepwise-output-cap",
          String(limits.outputBytes),
          stdbuf,
          head,
        ]),
    ...argv,
  ];
}

function minimalEnv(): Record<string, string> {
  return { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/tmp", LANG: "C.UTF-8", TERM: "dumb" };
}

/**
 * `command argv…` wrapped to run inside the sandbox: bwrap by its absolute path, limits inside,
 * and — where a pids cgroup is writable — entered into a fresh cgroup of its own first, so that
 * the process limit also holds for root (the kernel exempts uid 0 from RLIMIT_NPROC).
 */
export function sandboxed(argv: string[], options: SandboxOptions): { command: string; args: string[] } {
  const bwrap = systemProgram("bwrap") ?? "bwrap";
  const inner = [...sandboxArgs(options), ...limitedCommand(argv, options)];
  const cgroup = commandCgroup({ ...SANDBOX_LIMITS, ...options.limits }.processes);
  if (!cgroup) return { command: bwrap, args: inner };
  return {
    command: systemProgram("sh") ?? "/bin/sh",
    args: ["-c", JOIN_CGROUP, "stepwise-cgroup", cgroup, bwrap, ...inner],
  };
}

/** Moves this shell into cgroup `$1`, then becomes the command after it. */
const JOIN_CGROUP = 'echo $$ > "$1/cgroup.procs" || exit 125; shift; exec "$@"';
