import fs from "node:fs/promises";
import path from "node:path";
import { listDirectory } from "./git-dir-listings";
import { cachedConfig, configFingerprint, rememberConfig, type ConfigEntry } from "./git-config-cache";
import { gitProgram, gitHelperPaths, HARDENED_GIT_ENV, overridesFor } from "./git-hardening";
import type { CollectedOutput } from "../launcher/forker";
import { launchForOutput, LaunchRefused } from "../launcher/launcher";
import { sandboxAvailable, systemProgram } from "./sandbox";

/**
 * Every repository a git command started in a workspace can reach, found without running git on
 * the repositories' say-so: the repository the workspace lies in, and every nested repository,
 * submodule and linked worktree below it, with where each one's pointers lead — a `.git` file's
 * `gitdir:`, `commondir`, `objects/info/alternates`, `core.worktree`. Their configuration is read
 * by `git config --list` only (no repository program runs for that), inside the sandbox where one
 * exists, and every program-valued key any of them defines is overridden (`overridesFor`), so
 * `cd nested && git log -p` runs none of nested's drivers either.
 */

/** Entries walked below the workspace looking for nested repositories; beyond it the check gives up. */
export const REPOSITORY_SCAN_LIMIT = 200_000;

export interface RepositoryScan {
  /** Overrides for every repository found (see git-hardening.ts). */
  overrides: [string, string][];
  /** Directories outside the workspace a git command legitimately needs (an enclosing repository). */
  outsideMounts: string[];
  /** Why git must not run here, when `enclosing` is "refuse" and something leads outside. */
  refusal?: string;
  /**
   * Git directories outside the workspace that an agent task's worktree leads to (its own in the
   * repository's `.git/worktrees/`, and `.git` itself), with "allow": a confined command there
   * needs them mounted read-only for its git to find the repository at all.
   */
  linkedGitDirs: string[];
  /**
   * Some configuration could not be read (its git refused, cut off or killed): the overrides
   * cover what was read only. The scan of a moment later may differ.
   */
  incomplete?: true;
}

interface FoundRepository {
  /** Workspace-relative (or absolute, for an enclosing one) place of the `.git` entry, for messages. */
  label: string;
  gitDir: string;
  commonDir: string;
  alternates: string[];
  enclosing: boolean;
}

/**
 * `enclosing: "refuse"` (the read-only git tools): everything must resolve inside the workspace,
 * or the scan says why not. `"allow"` (git inside shell steps, git_commit which a person approved):
 * a repository enclosing the workspace is used, its overrides computed all the same.
 */
export async function inspectRepositories(
  workspace: string,
  options: { enclosing: "refuse" | "allow"; approved?: boolean },
): Promise<RepositoryScan> {
  const root = await fs.realpath(workspace);
  const inside = (target: string) => target === root || target.startsWith(root.endsWith("/") ? root : `${root}/`);
  const relative = (target: string) => path.relative(root, target) || ".";
  const problems: string[] = [];
  const found: FoundRepository[] = [];

  // A workspace with a `.git` of its own is its own repository, whatever encloses it.
  const enclosing = (await exists(path.join(root, ".git"))) ? undefined : await enclosingRepository(root);
  if (enclosing) {
    if (options.enclosing === "refuse") {
      problems.push("the workspace lies inside a repository whose top level is outside it");
    } else {
      const repository = await describeGitEntry(enclosing, path.join(enclosing, ".git"), true);
      if (repository && repository !== REACHES_NOTHING) found.push(repository);
    }
  }
  const walk = await findGitEntries(root);
  if (walk.incomplete && options.enclosing === "refuse") {
    problems.push(
      `the workspace holds more than ${REPOSITORY_SCAN_LIMIT} entries, too many to check for nested repositories`,
    );
  }
  const described = await Promise.all(walk.entries.map((entry) => describeGitEntry(path.dirname(entry), entry, false)));
  for (const [index, entry] of walk.entries.entries()) {
    const repository = described[index];
    if (repository === REACHES_NOTHING) continue;
    if (!repository) {
      problems.push(`${relative(entry)} points to a git directory that does not exist`);
      continue;
    }
    repository.label = relative(entry);
    found.push(repository);
  }
  await addGitDirsBelow(found);
  for (const repository of found) {
    if (repository.enclosing) continue;
    if (!inside(repository.gitDir))
      problems.push(`${repository.label} points to a git directory outside the workspace`);
    if (!inside(repository.commonDir))
      problems.push(`${repository.label} shares a git directory outside the workspace (commondir)`);
    if (repository.alternates.some((dir) => !inside(dir)))
      problems.push(`${repository.label} borrows objects from outside the workspace (alternates)`);
  }
  const outsideMounts = [
    ...new Set(
      found.flatMap((repository) =>
        [
          repository.gitDir,
          repository.commonDir,
          ...repository.alternates,
          ...(repository.enclosing ? [enclosing!] : []),
        ].filter((dir) => !inside(dir)),
      ),
    ),
  ];
  // Refused already: reading the configuration of what lies outside is not needed to say so.
  const readable = options.enclosing === "refuse" && problems.length > 0 ? [] : found;
  const { configs, complete } = await readConfigs(
    root,
    readable.map((repository) => repository.gitDir),
    outsideMounts,
    options.approved,
  );
  readable.forEach((repository, index) => {
    const worktree = configs[index]!.find((entry) => entry.key.toLowerCase() === "core.worktree")?.value;
    if (worktree === undefined || repository.enclosing) return;
    const target = path.resolve(repository.gitDir, worktree);
    if (!inside(target)) problems.push(`${repository.label} sets core.worktree outside the workspace`);
  });
  const refusal =
    options.enclosing === "refuse" && problems.length > 0
      ? `git is not run in this workspace: ${[...new Set(problems)].join("; ")}`
      : undefined;
  // Only for an agent task's worktree, `<repository>/.stepwise/worktrees/<name>` (server/agents/
  // worktrees.ts), and only inside that repository's own `.git`: any other `.git` file leading
  // outside must not get its target mounted (git-escape.test.ts).
  const taskRepository = /^(.+)\/\.stepwise\/worktrees\/[^/]+$/.exec(root)?.[1];
  const taskGitDir = taskRepository && path.join(taskRepository, ".git");
  const linkedGitDirs = !taskGitDir
    ? []
    : found
        .filter((repository) => !repository.enclosing)
        .flatMap((repository) => [repository.gitDir, repository.commonDir])
        .filter((dir) => !inside(dir) && (dir === taskGitDir || dir.startsWith(`${taskGitDir}/`)));
  return {
    overrides: overridesFor(configs),
    outsideMounts: options.enclosing === "allow" ? outsideMounts : [],
    linkedGitDirs: options.enclosing === "allow" ? [...new Set(linkedGitDirs)] : [],
    ...(refusal && { refusal }),
    ...(!complete && { incomplete: true }),
  };
}

/**
 * Submodules' and linked worktrees' git directories live in the common directory: added to
 * `found`, looked for once per common directory (every linked worktree shares its repository's).
 */
async function addGitDirsBelow(found: FoundRepository[]): Promise<void> {
  const below = new Map<string, Promise<string[]>>();
  for (const repository of found) {
    if (!below.has(repository.commonDir)) below.set(repository.commonDir, gitDirsBelow(repository.commonDir));
  }
  for (const repository of [...found]) {
    for (const gitDir of await below.get(repository.commonDir)!) {
      if (found.some((other) => other.gitDir === gitDir)) continue;
      found.push({
        ...repository,
        label: `${repository.label} (${path.relative(repository.commonDir, gitDir)})`,
        gitDir,
      });
    }
  }
}

/** The nearest directory above `root` holding a `.git` entry: the repository git would find. */
async function enclosingRepository(root: string): Promise<string | undefined> {
  for (let dir = path.dirname(root); ; dir = path.dirname(dir)) {
    if (await exists(path.join(dir, ".git"))) return dir;
    if (dir === path.dirname(dir)) return undefined;
  }
}

/**
 * Every `.git` entry (directory, file or link) below `root`, links never followed, `.git` not
 * entered. Each level's directories are listed together; listings of unchanged directories are
 * kept (git-dir-listings.ts), so scanning an unchanged workspace again costs a `stat` per directory.
 */
async function findGitEntries(root: string): Promise<{ entries: string[]; incomplete: boolean }> {
  const entries: string[] = [];
  let level = [root];
  let seen = 0;
  while (level.length > 0) {
    const next: string[] = [];
    for (let start = 0; start < level.length; start += LISTED_AT_ONCE) {
      const dirs = level.slice(start, start + LISTED_AT_ONCE);
      const listed = await Promise.all(dirs.map((dir) => listDirectory(dir)));
      for (const [index, children] of listed.entries()) {
        if (!children) continue; // unreadable: git cannot enter it either
        for (const child of children) {
          if (++seen > REPOSITORY_SCAN_LIMIT) return { entries, incomplete: true };
          const full = path.join(dirs[index]!, child.name);
          if (child.name === ".git") entries.push(full);
          else if (child.isDirectory) next.push(full);
        }
      }
    }
    level = next;
  }
  return { entries, incomplete: false };
}

/** Directories listed at the same time by the walk. */
const LISTED_AT_ONCE = 64;

/**
 * A `.git` entry that reaches no repository: a file without a `gitdir:` line, which git refuses
 * ("invalid gitfile format"), or an entry gone before it could be followed. Git making a
 * worktree writes its `.git` file empty first, and removing one deletes the checkout before its
 * record: taken for broken pointers, these refused every git started beside it.
 */
const REACHES_NOTHING = "reaches nothing";

/** Where a `.git` entry leads: its git directory, common directory and alternates (real paths). */
async function describeGitEntry(
  top: string,
  entry: string,
  enclosing: boolean,
): Promise<FoundRepository | typeof REACHES_NOTHING | undefined> {
  let gitDir: string;
  try {
    const stat = await fs.lstat(entry);
    if (stat.isFile()) {
      const text = await readSmall(entry);
      const pointer = text === undefined ? undefined : /^gitdir:\s*(.+?)\s*$/m.exec(text)?.[1];
      if (text !== undefined && !pointer) return REACHES_NOTHING;
      if (!pointer) throw new Error("unreadable");
      gitDir = await fs.realpath(path.resolve(top, pointer));
    } else {
      gitDir = await fs.realpath(entry);
    }
  } catch {
    // Gone meanwhile (a worktree being removed): nothing left to reach. Otherwise a broken pointer.
    return (await exists(entry)) ? undefined : REACHES_NOTHING;
  }
  const commonPointer = (await readSmall(path.join(gitDir, "commondir")))?.trim();
  let commonDir = gitDir;
  if (commonPointer)
    commonDir = await fs.realpath(path.resolve(gitDir, commonPointer)).catch(() => path.resolve(gitDir, commonPointer));
  const alternates: string[] = [];
  const objects = path.join(commonDir, "objects");
  for (const line of ((await readSmall(path.join(objects, "info", "alternates"))) ?? "").split("\n")) {
    const dir = line.trim();
    if (!dir || dir.startsWith("#")) continue;
    const target = path.resolve(objects, dir.replace(/^"|"$/g, ""));
    alternates.push(await fs.realpath(target).catch(() => target));
  }
  return { label: enclosing ? "the enclosing repository" : entry, gitDir, commonDir, alternates, enclosing };
}

/** Git directories of submodules (`modules/…`) and linked worktrees (`worktrees/*`) in a common directory. */
async function gitDirsBelow(commonDir: string): Promise<string[]> {
  const found: string[] = [];
  const queue = [path.join(commonDir, "modules"), path.join(commonDir, "worktrees")];
  let seen = 0;
  while (queue.length > 0 && seen < 10_000) {
    const dir = queue.pop()!;
    const children = await listDirectory(dir);
    if (!children) continue;
    for (const child of children) {
      seen++;
      if (!child.isDirectory || child.name === "objects" || child.name === "refs") continue;
      const full = path.join(dir, child.name);
      // Its listing names HEAD (kept for when it is walked next); unlistable, asked directly.
      const listing = await listDirectory(full);
      const hasHead = listing ? listing.some((entry) => entry.name === "HEAD") : await exists(path.join(full, "HEAD"));
      if (hasHead) found.push(await fs.realpath(full).catch(() => full));
      queue.push(full);
    }
  }
  return found;
}

/**
 * `git config --list` of each git directory: configuration only, no repository program runs. Inside
 * the sandbox (workspace and `extraMounts` read-only) where one exists — so an `include.path` to a
 * file outside them reads nothing, as the git that runs later in the same sandbox sees nothing
 * there either. Without a sandbox, only for a step a person approved (nothing else runs git there).
 */
async function readConfigs(
  root: string,
  gitDirs: string[],
  extraMounts: string[],
  approved: boolean | undefined,
): Promise<{ configs: ConfigEntry[][]; complete: boolean }> {
  if (gitDirs.length === 0) return { configs: [], complete: true };
  // Unchanged configuration is not read again (git-config-cache.ts says when an answer is kept).
  // A linked worktree without configuration of its own answers as its common directory does.
  const taken = await Promise.all(gitDirs.map((dir) => configFingerprint(dir)));
  const sharing = (index: number) => taken[index]!.sharesCommonConfig && gitDirs.includes(taken[index]!.commonDir);
  const kept = gitDirs.map((dir, index) => {
    if (taken[index]!.none) return [];
    return sharing(index) ? undefined : cachedConfig(dir, taken[index]!.fingerprint);
  });
  const missing = gitDirs.filter((_, index) => kept[index] === undefined && !sharing(index));
  const read = missing.length > 0 ? await listConfigs(root, missing, extraMounts, approved) : undefined;
  const own = gitDirs.map((dir, index) => {
    if (kept[index] || sharing(index)) return kept[index];
    const entries = read!.configs[missing.indexOf(dir)] ?? [];
    // Only a complete answer (the script ran to its end) may be kept.
    if (read!.complete) rememberConfig(dir, taken[index]!, entries);
    return entries;
  });
  return {
    configs: own.map((entries, index) => entries ?? own[gitDirs.indexOf(taken[index]!.commonDir)] ?? []),
    complete: read?.complete ?? true,
  };
}

/**
 * `git config --list` of each git directory, in one program, inside the sandbox (workspace and
 * `extraMounts` read-only) where one exists — so an `include.path` to a file outside them reads
 * nothing, as the git that runs later in the same sandbox sees nothing there either. Without a
 * sandbox, only for a step a person approved (nothing else runs git there).
 */
async function listConfigs(
  root: string,
  gitDirs: string[],
  extraMounts: string[],
  approved: boolean | undefined,
): Promise<{ configs: ConfigEntry[][]; complete: boolean }> {
  const git = gitProgram();
  const env: Record<string, string> = { ...HARDENED_GIT_ENV, GIT_CONFIG_COUNT: "0", LC_ALL: "C" };
  // One run for all: a record separator (\x01), then the NUL-separated `key\nvalue` entries.
  const script =
    'git=$1; shift; for dir in "$@"; do printf "\\001"; "$git" --git-dir="$dir" config --null --list 2>/dev/null; done; exit 0';
  const bash = systemProgram("bash") ?? "/bin/bash";
  const argv = [bash, "--noprofile", "--norc", "-c", script, "stepwise-config", git, ...gitDirs];
  const { stdout, complete } = await runConfigListing(argv, root, env, extraMounts, approved);
  const records = stdout.split("\x01").slice(1);
  const configs = gitDirs.map((_, index) =>
    (records[index] ?? "")
      .split("\0")
      .filter(Boolean)
      .map((entry) => {
        const newline = entry.indexOf("\n");
        return newline < 0
          ? { key: entry, value: "" }
          : { key: entry.slice(0, newline), value: entry.slice(newline + 1) };
      }),
  );
  return { configs, complete: complete && records.length === gitDirs.length };
}

/** Runs the configuration listing; `complete` is false when it could not run or its output was cut. */
async function runConfigListing(
  argv: string[],
  root: string,
  env: Record<string, string>,
  extraMounts: string[],
  approved: boolean | undefined,
): Promise<{ stdout: string; complete: boolean }> {
  let running: Promise<CollectedOutput>;
  try {
    running = launchForOutput(
      sandboxAvailable()
        ? {
            kind: "sandbox",
            argv,
            sandbox: {
              workspace: root,
              cwd: root,
              readOnlyPaths: [...extraMounts, ...gitHelperPaths()],
              wallSeconds: 30,
            },
          }
        : { kind: "approved", argv, approvedByPerson: approved, why: "reading repository configuration" },
      { cwd: root, env, output: { stdoutBytes: 8_000_000, stderrBytes: false, closeAfterBytes: 16_000_000 } },
    );
  } catch (error) {
    if (error instanceof LaunchRefused) return { stdout: "", complete: false };
    throw error;
  }
  const result = await running.catch(() => undefined);
  if (!result) return { stdout: "", complete: false };
  return { stdout: result.stdout.toString("utf8"), complete: !result.stdoutTruncated && result.exitCode === 0 };
}

async function readSmall(file: string): Promise<string | undefined> {
  try {
    const handle = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW);
    try {
      const buffer = Buffer.alloc(64 * 1024);
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, 0);
      return buffer.subarray(0, bytesRead).toString("utf8");
    } finally {
      await handle.close();
    }
  } catch {
    return undefined;
  }
}

async function exists(target: string): Promise<boolean> {
  return fs.lstat(target).then(
    () => true,
    () => false,
  );
}

/**
 * The overrides for every repository a command started in `workspace` can reach (git in shell
 * steps): an enclosing repository is allowed, its drivers disarmed like the nested ones'.
 */
export async function gitOverrides(workspace: string, approved?: boolean): Promise<[string, string][]> {
  return (await shellRepositories(workspace, approved)).overrides;
}

/** `gitOverrides`, with the git directories a confined shell command must see (`linkedGitDirs`). */
export async function shellRepositories(
  workspace: string,
  approved?: boolean,
): Promise<{ overrides: [string, string][]; linkedGitDirs: string[] }> {
  const { overrides, linkedGitDirs } = await inspectRepositories(workspace, { enclosing: "allow", approved });
  return { overrides, linkedGitDirs };
}
