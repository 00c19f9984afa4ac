import fs from "node:fs/promises";
import path from "node:path";

/**
 * What `git --git-dir=<dir> config --list` answered, kept per git directory so the repository
 * scan (git-repositories.ts) need not start a sandboxed git for configuration that has not
 * changed. Every git Stepwise runs still gets overrides for the configuration as it is now: an
 * answer is reused only while every file git reads for it is exactly as it was before it was read.
 *
 * - The fingerprint is the common directory `<dir>/commondir` names (read each time) and the
 *   identity and change times (device, inode, size, mtime, ctime in nanoseconds) of
 *   `<dir>/config`, `<dir>/config.worktree`, and the common directory's `config` and
 *   `config.worktree`. Writing, replacing or renaming any of them changes it, and ctime cannot be
 *   set back by a program (`touch -d` sets mtime and moves ctime). Times, not contents: with a
 *   content hash, a file switched between two versions while git reads it (A, then B read by
 *   git, then A again) would keep B's answer for A's configuration.
 * - Racy answers are not kept: a file changed less than `RACY_MARGIN_NS` before it was looked at
 *   may change again within the same coarse clock tick of the file system, with the same size,
 *   and the fingerprint could not tell (git's own "racy index" problem, solved the same way). A
 *   change after it was looked at always moves ctime past it.
 * - Configuration that includes other files (`include.*`, `includeIf.*`) is never kept: those
 *   files, and the conditions (branch, directory), lie outside the fingerprint.
 */

export interface ConfigEntry {
  key: string;
  value: string;
}

const RACY_MARGIN_NS = 2_000_000_000n;
const MAX_ENTRIES = 500;

const cache = new Map<string, { fingerprint: string; entries: ConfigEntry[] }>();

async function statPart(file: string, newest: { ns: bigint }): Promise<string> {
  const stat = await fs
    .stat(file, { bigint: true })
    .catch((error: NodeJS.ErrnoException) => (error.code === "ENOENT" || error.code === "ENOTDIR" ? undefined : null));
  if (stat === undefined) return "-";
  if (stat === null) {
    newest.ns = BigInt(Number.MAX_SAFE_INTEGER) * 1_000_000n; // unknown: never kept
    return "?";
  }
  for (const ns of [stat.mtimeNs, stat.ctimeNs]) if (ns > newest.ns) newest.ns = ns;
  return `${stat.dev}:${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}`;
}

export interface ConfigFingerprint {
  fingerprint: string;
  /** A file changed too recently to keep an answer by. */
  racy: boolean;
  /** The common directory (the git directory itself unless `commondir` names another). */
  commonDir: string;
  /**
   * A linked worktree's git directory without a `config.worktree`: git reads only the common
   * directory's `config` for it (never `<dir>/config`), so its answer is the common directory's,
   * less that one's own `config.worktree` — which, kept in, only adds overrides.
   */
  sharesCommonConfig: boolean;
  /**
   * None of the files exists: git has no configuration to list (system and global configuration
   * are off), so the answer is empty without asking. A worktree's `logs/` folder, which the scan
   * takes for a git directory by its `HEAD`, is one.
   */
  none: boolean;
}

/** The fingerprint of the configuration git reads for `gitDir`. */
export async function configFingerprint(gitDir: string): Promise<ConfigFingerprint> {
  const startedNs = BigInt(Date.now()) * 1_000_000n;
  const newest = { ns: 0n };
  const commonPointer = (await fs.readFile(path.join(gitDir, "commondir"), "utf8").catch(() => ""))
    .split("\n")[0]!
    .trim();
  const commonDir = commonPointer ? path.resolve(gitDir, commonPointer) : gitDir;
  const parts = await Promise.all(
    [
      path.join(gitDir, "config"),
      path.join(gitDir, "config.worktree"),
      path.join(commonDir, "config"),
      path.join(commonDir, "config.worktree"),
    ].map((file) => statPart(file, newest)),
  );
  return {
    fingerprint: `${commonDir}|${parts.join("|")}`,
    racy: newest.ns > startedNs - RACY_MARGIN_NS,
    commonDir,
    sharesCommonConfig: commonDir !== gitDir && parts[1] === "-",
    none: parts.every((part) => part === "-"),
  };
}

/** The kept answer for `gitDir` when its configuration files are exactly as they were. */
export function cachedConfig(gitDir: string, fingerprint: string): ConfigEntry[] | undefined {
  const kept = cache.get(gitDir);
  return kept?.fingerprint === fingerprint ? kept.entries : undefined;
}

/** Keeps an answer read after `taken` was, unless that was racy or the configuration includes other files. */
export function rememberConfig(gitDir: string, taken: ConfigFingerprint, entries: ConfigEntry[]): void {
  const includes = entries.some((entry) => /^include(if)?\./i.test(entry.key));
  if (taken.racy || includes) {
    cache.delete(gitDir);
    return;
  }
  if (cache.size >= MAX_ENTRIES && !cache.has(gitDir)) cache.delete(cache.keys().next().value!);
  cache.set(gitDir, { fingerprint: taken.fingerprint, entries });
}
