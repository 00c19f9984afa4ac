import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { launchSync } from "../launcher/launcher";
import {
  SANDBOX_LIMITS,
  SYSTEM_PROGRAM_DIRS,
  systemProgram,
  UNAPPROVED_WALL_SECONDS,
  type SandboxLimits,
} from "../launcher/sandbox-command";
import { sandboxCgroupParent } from "../launcher/sandbox-cgroups";

/* The self-test that proves from inside that the sandbox holds, and what follows from its answer. */

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
