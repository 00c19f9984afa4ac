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

export {
  SANDBOX_LIMITS,
  SANDBOX_UID,
  sandboxArgs,
  sandboxed,
  systemProgram,
  UNAPPROVED_WALL_SECONDS,
  type SandboxLimits,
  type SandboxOptions,
} from "../launcher/sandbox-command";
export {
  describeSandbox,
  noSandboxReason,
  sandboxAvailable,
  sandboxStatus,
  type SandboxCheck,
  type SandboxStatus,
} from "./sandbox-self-test";
