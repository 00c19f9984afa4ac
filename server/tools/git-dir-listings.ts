import fs from "node:fs/promises";

/**
 * Directory listings the repository scan (git-repositories.ts) reads on every git Stepwise runs,
 * kept while the directory is exactly as it was, so a scan of an unchanged workspace costs one
 * `stat` per directory instead of one `readdir` (issue 38, item 6: an agent's hand-out and DONE
 * each scan the workspace). The answer is the same as reading again:
 *
 * - A listing (names and entry types) changes only by adding, removing or renaming an entry, and
 *   each of those moves the directory's mtime and ctime; a listing is reused only while the
 *   directory's device, inode, mtime and ctime (nanoseconds) are all unchanged. Replacing the
 *   directory (or mounting over it) changes device or inode. ctime cannot be set back by a program.
 * - Racy listings are not kept: a directory changed less than `RACY_MARGIN_NS` before it was looked
 *   at may change again within the same coarse clock tick of the file system and keep its times
 *   (the same rule as git-config-cache.ts). A change after it was looked at moves its times past it.
 * - Only what the scan asks is kept: names and whether each is a directory. Nothing is followed.
 */

export interface ListedEntry {
  name: string;
  isDirectory: boolean;
}

const RACY_MARGIN_NS = 2_000_000_000n;
/** Directories kept at most; beyond, the oldest go (a huge workspace then reads some again). */
const MAX_DIRECTORIES = 100_000;

const listings = new Map<string, { identity: string; entries: ListedEntry[] }>();

/** The entries of `dir`, or undefined when it cannot be read (as `readdir` failing). */
export async function listDirectory(dir: string): Promise<ListedEntry[] | undefined> {
  const startedNs = BigInt(Date.now()) * 1_000_000n;
  const stat = await fs.stat(dir, { bigint: true }).catch(() => undefined);
  if (!stat?.isDirectory()) {
    listings.delete(dir);
    return undefined;
  }
  const identity = `${stat.dev}:${stat.ino}:${stat.mtimeNs}:${stat.ctimeNs}`;
  const kept = listings.get(dir);
  if (kept?.identity === identity) return kept.entries;
  let entries: ListedEntry[];
  try {
    const children = await fs.readdir(dir, { withFileTypes: true });
    entries = children.map((child) => ({ name: child.name, isDirectory: child.isDirectory() }));
  } catch {
    listings.delete(dir);
    return undefined;
  }
  // Read after the times were taken: a change in between shows as new times next time.
  const newest = stat.mtimeNs > stat.ctimeNs ? stat.mtimeNs : stat.ctimeNs;
  if (newest > startedNs - RACY_MARGIN_NS) {
    listings.delete(dir);
    return entries;
  }
  if (listings.size >= MAX_DIRECTORIES && !listings.has(dir)) listings.delete(listings.keys().next().value!);
  listings.set(dir, { identity, entries });
  return entries;
}
