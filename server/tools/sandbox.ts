import { spawnSync } from "node:child_process";
import fs from "node:fs";

/**
 * The OS boundary for commands Stepwise runs without asking: read-only shell steps (the parser
 * judged them read-only) and read-only git. The parser decides what needs approval; this makes
 * "read-only" hold even when the parser is wrong. On Linux with bubblewrap:
 *
 * - the system directories and the workspace are mounted read-only, nothing else of the host's
 *   files (no home directory, no keys, no data folder);
 * - no network (its own network namespace), its own PID namespace (the server's /proc is not
 *   there), a private /tmp, no environment but a minimal one (no server secrets);
 * - it dies with the server, and the caller enforces the time and output limits.
 *
 * Without a working sandbox (bubblewrap missing, or STEPWISE_SANDBOX=off) nothing runs ungated:
 * every shell and git step needs a person's approval (see `sandboxAvailable`).
 */

const SYSTEM_DIRS = ["/usr", "/etc/alternatives", "/etc/ssl/certs"];

let probed: boolean | undefined;

/** Whether read-only commands can be confined here; probed once per process. */
export function sandboxAvailable(): boolean {
  if (process.env.STEPWISE_SANDBOX === "off") return false;
  if (probed === undefined) {
    const probe = spawnSync("bwrap", sandboxArgs({ workspace: "/usr", cwd: "/usr", env: {} }).concat(["true"]), {
      stdio: "ignore",
      timeout: 10_000,
    });
    probed = probe.status === 0;
  }
  return probed;
}

export interface SandboxOptions {
  /** Mounted read-only at its own path. */
  workspace: string;
  /** Where the command starts (inside the workspace). */
  cwd: string;
  /** The whole environment the command sees. */
  env: Record<string, string>;
  /** More host paths to mount read-only (e.g. Stepwise's own helper programs). */
  readOnlyPaths?: string[];
}

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
  args.push("--unshare-all", "--die-with-parent", "--new-session", "--clearenv");
  for (const [name, value] of Object.entries({ ...minimalEnv(), ...options.env })) args.push("--setenv", name, value);
  args.push("--chdir", options.cwd);
  return args;
}

function minimalEnv(): Record<string, string> {
  return { PATH: "/usr/local/bin:/usr/bin:/bin", HOME: "/tmp", LANG: "C.UTF-8", TERM: "dumb" };
}

/** `command argv…` wrapped to run inside the sandbox. */
export function sandboxed(argv: string[], options: SandboxOptions): { command: string; args: string[] } {
  return { command: "bwrap", args: [...sandboxArgs(options), ...argv] };
}
