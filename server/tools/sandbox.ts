import { randomUUID } from "node:crypto";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchSync } from "./launcher";

/**
 * The OS boundary for commands Stepwise runs without asking: read-only shell steps (the parser
 * judged them read-only) and read-only git. The parser decides what needs approval; this makes
 * "read-only" hold even when the parser is wrong — also when Stepwise runs as root, which is the
 * usual case in containers and CI. On Linux with bubblewrap:
 *
 * - the system directories and the workspace are mounted read-only, nothing else of the host's
 *   files (no home directory, no keys, no data folder);
 * - no network (its own network namespace), its own PID namespace (the server's /proc is not
 *   there), a private /tmp, no environment but a minimal one (no server secrets);
 * - its own user namespace, where the command runs as uid/gid 65534 with every capability dropped
 *   (bounding set included): bubblewrap started by root would otherwise leave the command root's
 *   capabilities inside the namespace, enough to remount the "read-only" workspace read-write;
 * - resource limits set by `prlimit` before the command starts and not raisable by it: CPU time,
 *   address space, file size, open files, processes (also by a cgroup's pids.max where one is
 *   writable: root is exempt from RLIMIT_NPROC), a wall-time limit and a cap on output bytes;
 * - it dies with the server, and the caller's timeout applies too.
 *
 * A self-test (`sandboxStatus`, once per process) proves from inside that these hold. Without a
 * sandbox that holds (bubblewrap missing, the self-test failing, or STEPWISE_SANDBOX=off) nothing
 * runs ungated: every shell and git step needs a person's approval (see `sandboxAvailable`), and a
 * worker that cannot confine does not run a step whose ungated status relied on confinement.
 */

const SYSTEM_DIRS = ["/usr", "/etc/alternatives", "/etc/ssl/certs"];

/**
 * Where Stepwise looks for the programs it runs itself: fixed system directories only, never PATH,
 * whose entries a workspace, a step or the environment could make point at a program of theirs.
 */
const SYSTEM_PROGRAM_DIRS = ["/usr/bin", "/bin", "/usr/sbin", "/sbin"];

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
    bash,
    "--noprofile",
    "--norc",
    "-c",
    OUTPUT_CAP,
    "stepwise-output-cap",
    String(limits.outputBytes),
    stdbuf,
    head,
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

// ---- cgroups: the process limit root cannot escape ----------------------------------------------

let cgroupParent: string | null | undefined;

/**
 * The cgroup under which each sandboxed command gets its own (pids controller, v2 or v1), or null
 * where none is writable (then only RLIMIT_NPROC applies, which binds unless Stepwise runs as root).
 */
function sandboxCgroupParent(): string | null {
  if (cgroupParent !== undefined) return cgroupParent;
  cgroupParent = null;
  const candidates: { base: string; v2: boolean }[] = [];
  if (fs.existsSync("/sys/fs/cgroup/cgroup.controllers")) candidates.push({ base: "/sys/fs/cgroup", v2: true });
  if (fs.existsSync("/sys/fs/cgroup/pids/cgroup.procs")) candidates.push({ base: "/sys/fs/cgroup/pids", v2: false });
  for (const { base, v2 } of candidates) {
    try {
      const parent = path.join(base, "stepwise-sandbox");
      if (v2) fs.writeFileSync(path.join(base, "cgroup.subtree_control"), "+pids");
      fs.mkdirSync(parent, { recursive: true });
      if (v2) fs.writeFileSync(path.join(parent, "cgroup.subtree_control"), "+pids");
      // Proves a child can be made and limited here before relying on it.
      const probe = path.join(parent, `probe-${process.pid}`);
      fs.mkdirSync(probe);
      try {
        fs.writeFileSync(path.join(probe, "pids.max"), "1");
      } finally {
        fs.rmdirSync(probe);
      }
      cgroupParent = parent;
      break;
    } catch {
      // Not writable here (an unprivileged container, a read-only /sys): try the next.
    }
  }
  return cgroupParent;
}

/**
 * Empty cgroups older than this are a finished command's (a command joins its cgroup as the first
 * thing its shell does, well within this even on a loaded machine); younger ones may belong to a
 * command that has not started yet — in this process or another worker's.
 */
const CGROUP_JOIN_GRACE_MS = 60_000;

/**
 * A fresh cgroup limited to `processes`, after removing the empty ones of finished commands. Only
 * those: sweeping every empty cgroup removed the one another command had just been given before
 * its shell joined it, and that command failed (exit 125) — two sandboxed steps starting together.
 */
function commandCgroup(processes: number): string | undefined {
  const parent = sandboxCgroupParent();
  if (!parent) return undefined;
  try {
    const now = Date.now();
    for (const entry of fs.readdirSync(parent, { withFileTypes: true })) {
      if (!entry.isDirectory()) continue;
      const dir = path.join(parent, entry.name);
      try {
        if (now - fs.statSync(dir).mtimeMs < CGROUP_JOIN_GRACE_MS) continue;
        fs.rmdirSync(dir); // fails while a command still runs in it
      } catch {
        // Busy (still running) or gone (another process removed it).
      }
    }
    const dir = path.join(parent, randomUUID());
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, "pids.max"), String(processes));
    return dir;
  } catch {
    return undefined;
  }
}

// ---- the self-test ------------------------------------------------------------------------------

export interface SandboxCheck {
  /** What was tried from inside. */
  name: string;
  /** True when the attempt failed, as it must. */
  held: boolean;
  detail?: string;
}

export interface SandboxStatus {
  /** True when every check that the sandbox's promise rests on held. */
  holds: boolean;
  /** Why no command runs confined here, when it does not hold. */
  reason?: string;
  checks: SandboxCheck[];
  /** How the process limit is enforced: a cgroup, or RLIMIT_NPROC alone (which root escapes). */
  processLimit: "cgroup" | "rlimit";
  limits: SandboxLimits;
  unapprovedWallSeconds: number;
}

/**
 * Run inside the sandbox by the self-test; one line per check, `name ok|fail detail`. `$1` is the
 * workspace (mounted read-only), `$2` a process count beyond the test's limit.
 */
const SELF_TEST = String.raw`
ws=$1; over=$2
say() { if [ "$2" = 0 ]; then echo "$1 ok $3"; else echo "$1 fail $3"; fi; }
u=$(id -u); [ "$u" != 0 ]; say uid $? "uid=$u"
cap=$(sed -n 's/^CapEff:[[:space:]]*//p' /proc/self/status); [ "$cap" = 0000000000000000 ]; say capabilities $? "CapEff=$cap"
if touch "$ws/.stepwise-sandbox-probe" 2>/dev/null; then say write 1; else say write 0; fi
# The mount(2) call itself, not only util-linux mount (which refuses any uid but 0 by itself).
case $(uname -m) in x86_64) nr=165 ;; aarch64) nr=40 ;; *) nr= ;; esac
remounted=0
if mount -o remount,bind,rw "$ws" 2>/dev/null; then remounted=1; fi
if [ -n "$nr" ] && perl -e 'my ($nr, $src, $dst) = ($ARGV[0], "none", $ARGV[1]); exit(syscall($nr, $src, $dst, 0, 4128, 0) == 0 ? 0 : 1)' "$nr" "$ws" 2>/dev/null; then remounted=1; fi
say remount $remounted
if mount -t tmpfs none "$ws" 2>/dev/null; then say mount 1; else say mount 0; fi
if (ulimit -Hn $(( $(ulimit -Hn) + 1 ))) 2>/dev/null || (ulimit -Hv unlimited) 2>/dev/null; then say raise-limit 1; else say raise-limit 0; fi
if chroot / true 2>/dev/null; then say chroot 1; else say chroot 0; fi
ifaces=$(sed -n 's/^ *\([^: ]*\):.*/\1/p' /proc/net/dev | grep -vx lo | tr '\n' ' ')
[ -z "$ifaces" ]; say network $? "interfaces=$ifaces"
forked=$(perl -e 'my $n = 0; for (1..$ARGV[0]) { my $p = fork(); last unless defined $p; if (!$p) { close STDOUT; close STDERR; sleep 2; exit 0 } $n++ } print $n' "$over" 2>/dev/null)
[ -n "$forked" ] && [ "$forked" -lt "$over" ]; say processes $? "forked=$forked/$over"
`;

/** Checks without which the sandbox does not hold; `processes` only decides how it is reported. */
const REQUIRED_CHECKS = ["uid", "capabilities", "write", "remount", "mount", "raise-limit", "chroot", "network"];

let status: SandboxStatus | undefined;
/** The self-test's own wall time inside the sandbox. */
const SELF_TEST_WALL_SECONDS = 60;

/** The self-test's result for this process: run once, at first need, then cached. */
export function sandboxStatus(): SandboxStatus {
  status ??= selfTest();
  return status;
}

/**
 * The self-test, tried again once when it was cut off by its time limit rather than answered: on a
 * busy machine a slow start must not pass for a sandbox that does not hold (or the other way round).
 */
function selfTest(): SandboxStatus {
  const first = selfTestRun();
  return first.timedOut ? selfTestRun().result : first.result;
}

function selfTestRun(): { result: SandboxStatus; timedOut: boolean } {
  const base = {
    checks: [],
    processLimit: "rlimit" as const,
    limits: SANDBOX_LIMITS,
    unapprovedWallSeconds: UNAPPROVED_WALL_SECONDS,
  };
  const missing = ["bwrap", "prlimit", "bash", "head", "stdbuf", "timeout"].filter((name) => !systemProgram(name));
  if (missing.length > 0) {
    const result: SandboxStatus = {
      ...base,
      holds: false,
      reason: `Not installed in ${SYSTEM_PROGRAM_DIRS.join(", ")}: ${missing.join(", ")}`,
    };
    return { result, timedOut: false };
  }
  const workspace = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-sandbox-test-"));
  try {
    const testProcesses = 16;
    const run = launchSync(
      {
        kind: "sandbox",
        argv: [
          systemProgram("bash")!,
          "--noprofile",
          "--norc",
          "-c",
          SELF_TEST,
          "self-test",
          workspace,
          String(testProcesses * 2),
        ],
        sandbox: {
          workspace,
          cwd: workspace,
          // Generous: an idle machine answers in about a second; a busy one must not be cut off.
          wallSeconds: SELF_TEST_WALL_SECONDS,
          limits: { processes: testProcesses },
        },
      },
      { env: {}, timeoutMs: (SELF_TEST_WALL_SECONDS + 30) * 1000 },
    );
    // `timeout` exits 124 (or 137 after its kill) when the wall time ran out; spawnSync kills by signal.
    const timedOut = run.status === 124 || run.status === 137 || run.signal !== null;
    const checks: SandboxCheck[] = String(run.stdout ?? "")
      .split("\n")
      .map((line) => /^(\S+) (ok|fail) ?(.*)$/.exec(line))
      .filter((match): match is RegExpExecArray => match !== null)
      .map(([, name, result, detail]) => ({ name: name!, held: result === "ok", ...(detail && { detail }) }));
    const wrote = fs.existsSync(path.join(workspace, ".stepwise-sandbox-probe"));
    if (wrote) checks.push({ name: "write (seen from outside)", held: false });
    const failed = REQUIRED_CHECKS.filter((name) => !checks.some((check) => check.name === name && check.held));
    const processLimit = checks.some((check) => check.name === "processes" && check.held) ? "cgroup" : "rlimit";
    const holds = failed.length === 0 && !wrote;
    const stderr = String(run.stderr ?? "")
      .trim()
      .split("\n")
      .slice(-2)
      .join(" ");
    const result: SandboxStatus = {
      ...base,
      checks,
      processLimit: processLimit === "cgroup" && sandboxCgroupParent() ? "cgroup" : "rlimit",
      holds,
      ...(!holds && {
        reason:
          checks.length === 0
            ? `The sandbox did not start${stderr ? `: ${stderr}` : ""}`
            : `From inside the sandbox these did not fail as they must: ${failed.join(", ")}`,
      }),
    };
    return { result, timedOut: timedOut && !holds };
  } finally {
    fs.rmSync(workspace, { recursive: true, force: true });
  }
}

/** Whether read-only commands can be confined by this process (STEPWISE_SANDBOX=off says no). */
export function sandboxAvailable(): boolean {
  if (process.env.STEPWISE_SANDBOX === "off") return false;
  return sandboxStatus().holds;
}

/** What the settings page shows: whether commands run confined here, and what was proven. */
export function describeSandbox(): SandboxStatus & { enabled: boolean } {
  const enabled = process.env.STEPWISE_SANDBOX !== "off";
  if (!enabled) {
    return {
      enabled,
      holds: false,
      reason: "Turned off (STEPWISE_SANDBOX=off)",
      checks: [],
      processLimit: "rlimit",
      limits: SANDBOX_LIMITS,
      unapprovedWallSeconds: UNAPPROVED_WALL_SECONDS,
    };
  }
  return { enabled, ...sandboxStatus() };
}

/** Why this process cannot confine, for messages that send a step to a person instead. */
export function noSandboxReason(): string {
  return describeSandbox().reason ?? "No sandbox";
}
