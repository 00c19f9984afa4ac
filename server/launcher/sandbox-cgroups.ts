import { randomUUID } from "node:crypto";
import fs from "node:fs";
import path from "node:path";

/* The process limit root cannot escape: a pids cgroup of its own for each sandboxed command. */

let cgroupParent: string | null | undefined;

/**
 * The cgroup under which each sandboxed command gets its own (pids controller, v2 or v1), or null
 * where none is writable (then only RLIMIT_NPROC applies, which binds unless Stepwise runs as root).
 */
export function sandboxCgroupParent(): string | null {
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
export function commandCgroup(processes: number): string | undefined {
  const parent = sandboxCgroupParent();
  if (!parent) return undefined;
  try {
    const now = Date.now();
    if (now - lastSweep >= SWEEP_EVERY_MS) {
      lastSweep = now;
      sweepFinishedCgroups(parent, now);
    }
    const dir = path.join(parent, randomUUID());
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, "pids.max"), String(processes));
    return dir;
  } catch {
    return undefined;
  }
}

/**
 * Sweeping reads and stats every cgroup of the last minute: on every command that was a few
 * milliseconds of a git's launch on a busy machine, so it runs at most this often per process.
 */
const SWEEP_EVERY_MS = 5_000;
let lastSweep = 0;

function sweepFinishedCgroups(parent: string, now: number): void {
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
}
