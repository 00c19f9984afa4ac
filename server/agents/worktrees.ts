import fs from "node:fs/promises";
import path from "node:path";
import { GitCommandError, runGit, type Repository } from "../tools/git";
import { inspectRepositories } from "../tools/git-repositories";
import { sandboxAvailable } from "../tools/sandbox";

/**
 * A git worktree per agent task (issue "Parallel agent work"): when the workspace is a git
 * repository of its own, each agent task gets a checkout of its own on its own branch, so agents
 * working in parallel never edit the same files on disk. The run has an integration branch; a
 * task's branch starts from it (so from its dependencies' merged results), and a finished task's
 * branch is merged back into it — never forced, never rewritten.
 *
 * Layout, inside the workspace repository's top level (so inside the workspace, the confined
 * place every git and shell call of Stepwise already lives in):
 *
 *   <workspace>/.stepwise/worktrees/<run8>-integration   the run's integration branch, checked out
 *   <workspace>/.stepwise/worktrees/<run8>-<step>        a task's worktree
 *   branches  stepwise/<run8>/integration, stepwise/<run8>/<step>
 *
 * `.stepwise/` is added to the repository's `.git/info/exclude`, so the person's own checkout
 * never shows (or commits) the worktrees. Every git call goes through `runGit`: git by its
 * absolute path, an argument array, and the hardened configuration (no hooks, no fsmonitor, no
 * user or system configuration, every repository-named program disarmed), in the sandbox with only
 * the workspace (repository, worktrees, git directory) writable. Nobody approved these calls, so
 * without a sandbox there are no worktrees: `workspaceRepository` finds none and tasks work in the
 * workspace itself.
 */

export const WORKTREES_DIR = ".stepwise/worktrees";
const IDENTITY = {
  GIT_AUTHOR_NAME: "Stepwise",
  GIT_AUTHOR_EMAIL: "stepwise@localhost",
  GIT_COMMITTER_NAME: "Stepwise",
  GIT_COMMITTER_EMAIL: "stepwise@localhost",
};
/** Git writes here are Stepwise's own bookkeeping; a minute is plenty, a hung git is cut off. */
const GIT_TIMEOUT_MS = 120_000;

/** The first 8 characters of a run id (a UUID): enough to tell a workspace's runs apart. */
export function runShort(runId: string): string {
  return runId
    .replace(/[^a-zA-Z0-9]/g, "")
    .slice(0, 8)
    .toLowerCase();
}

/** A step id as a branch and directory name component: letters, digits, `_` and `-` only. */
export function stepComponent(stepId: string): string {
  const safe = stepId.replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 64);
  return /^[A-Za-z0-9]/.test(safe) ? safe : `s${safe}`;
}

export function integrationBranch(runId: string): string {
  return `stepwise/${runShort(runId)}/integration`;
}

export function taskBranch(runId: string, stepId: string): string {
  return `stepwise/${runShort(runId)}/${stepComponent(stepId)}`;
}

/** Workspace-relative place of a task's worktree (or the integration checkout, for `integration`). */
export function worktreeRelativePath(runId: string, stepId: string | "integration"): string {
  const name = stepId === "integration" ? "integration" : stepComponent(stepId);
  return `${WORKTREES_DIR}/${runShort(runId)}-${name}`;
}

export interface WorkspaceRepo {
  repository: Repository;
  /** The workspace root (real path), the repository's top level. */
  root: string;
}

/**
 * What `git rev-parse` answered for a workspace, kept while the files it depends on stay as they
 * were (`headState`): whether the workspace is its repository's top level with a commit. The
 * repository scan (overrides for every repository git can reach, refusal of anything leading
 * outside) is not kept here: it runs on every call, reading configuration again only when it
 * changed (tools/git-config-cache.ts), so a git program started with this answer is hardened for
 * the configuration as it is then.
 */
const topLevelAnswers = new Map<string, { state: string; usable: boolean }>();

/** The files `rev-parse --show-prefix HEAD^{commit}` depends on, by identity and change time. */
async function headState(root: string): Promise<string> {
  const dotGit = path.join(root, ".git");
  const head = await fs.readFile(path.join(dotGit, "HEAD"), "utf8").catch(() => "");
  const ref = /^ref: (refs\/[^\s]+)\s*$/m.exec(head)?.[1];
  const files = ["HEAD", "config", "config.worktree", "commondir", "packed-refs", ...(ref ? [ref] : [])];
  const stats = await Promise.all(
    files.map(async (file) => {
      const stat = await fs.stat(path.join(dotGit, file), { bigint: true }).catch(() => undefined);
      return stat ? `${stat.ino}:${stat.size}:${stat.mtimeNs}:${stat.ctimeNs}` : "-";
    }),
  );
  return `${head}|${stats.join("|")}`;
}

/**
 * The workspace as a repository worktrees can be made in: its own top level with a `.git`
 * directory (not a linked worktree, not a directory inside a larger repository) and at least one
 * commit. Otherwise undefined, and tasks work in the workspace itself, as before.
 */
export async function workspaceRepository(workspaceRoot: string): Promise<WorkspaceRepo | undefined> {
  if (!sandboxAvailable()) return undefined; // nobody approved these gits: they run confined or not at all
  const root = await fs.realpath(workspaceRoot).catch(() => undefined);
  if (!root) return undefined;
  const dotGit = await fs.lstat(path.join(root, ".git")).catch(() => undefined);
  if (!dotGit?.isDirectory()) return undefined;
  // What openRepository checks (`contained`), without its `rev-parse`: that answer is kept below.
  const scan = await inspectRepositories(root, { enclosing: "refuse" }).catch(() => undefined);
  if (!scan || scan.refusal) return undefined; // something leads outside, or unreadable: no worktrees
  const repository: Repository = {
    cwd: root,
    prefix: "",
    overrides: scan.overrides,
    contained: true,
    outsideMounts: [],
  };
  const state = await headState(root);
  const kept = topLevelAnswers.get(root);
  if (kept?.state === state) return kept.usable ? { repository, root } : undefined;
  // One git for both: the workspace's place in its repository (top level: an empty line) and its commit.
  const answer = await git({ repository, root }, ["rev-parse", "--show-prefix", "HEAD^{commit}"], {
    okExitCodes: [128],
  }).catch(() => undefined);
  if (!answer) return undefined; // git could not run (refused, cut off): no worktrees this time
  const [prefix, commit] = answer.stdout.split("\n");
  const usable = answer.exitCode === 0 && prefix === "" && /^[0-9a-f]{40,64}$/.test(commit ?? "");
  topLevelAnswers.set(root, { state, usable });
  return usable ? { repository, root } : undefined;
}

async function git(
  repo: WorkspaceRepo,
  args: string[],
  options: { cwd?: string; okExitCodes?: number[]; env?: Record<string, string> } = {},
) {
  return runGit(args, {
    cwd: options.cwd ?? repo.root,
    signal: AbortSignal.timeout(GIT_TIMEOUT_MS),
    repository: repo.repository,
    ...(options.okExitCodes && { okExitCodes: options.okExitCodes }),
    env: { ...IDENTITY, ...(options.env ?? {}) },
  });
}

async function branchExists(repo: WorkspaceRepo, branch: string): Promise<boolean> {
  const found = await git(repo, ["rev-parse", "--verify", "--quiet", `refs/heads/${branch}`], { okExitCodes: [1] });
  return found.exitCode === 0;
}

/**
 * Where a run's agent work is merged, for the person who will take it: the integration branch in
 * the workspace's repository, and whether it exists yet (it is made when the first task starts).
 * Null when the workspace is no repository worktrees can be made in: tasks then edit it directly.
 */
export async function runIntegration(
  workspaceRoot: string,
  runId: string,
): Promise<{ branch: string; exists: boolean; repositoryRoot: string } | null> {
  const repo = await workspaceRepository(workspaceRoot);
  if (!repo) return null;
  const branch = integrationBranch(runId);
  return { branch, exists: await branchExists(repo, branch), repositoryRoot: repo.root };
}

/**
 * Registered worktrees of the repository, by real path, read as `git worktree list` reads them:
 * each record in `.git/worktrees/` names its checkout's `.git` file in `gitdir`. No git runs.
 */
async function listWorktrees(repo: WorkspaceRepo): Promise<{ path: string; record: string }[]> {
  const records = path.join(repo.root, ".git", "worktrees");
  const names = await fs.readdir(records).catch(() => [] as string[]);
  const found = await Promise.all(
    names.map(async (name) => {
      const gitFile = (await fs.readFile(path.join(records, name, "gitdir"), "utf8").catch(() => "")).trim();
      return gitFile
        ? { path: path.dirname(path.resolve(records, name, gitFile)), record: path.join(records, name) }
        : [];
    }),
  );
  return found.flat();
}

/**
 * Whether the worktree at `absolute` is registered and really there: its directory has the `.git`
 * file leading back to its record. A checkout removed behind Stepwise's back is not, and is made again.
 */
async function worktreeInPlace(repo: WorkspaceRepo, absolute: string): Promise<boolean> {
  const registered = (await listWorktrees(repo)).find((worktree) => worktree.path === absolute);
  if (!registered) return false;
  const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(
    await fs.readFile(path.join(absolute, ".git"), "utf8").catch(() => ""),
  )?.[1];
  return pointer !== undefined && path.resolve(absolute, pointer) === registered.record;
}

/** Keeps `.stepwise/` out of the person's own `git status` (and `git add -A`). */
async function excludeStepwiseDir(repo: WorkspaceRepo): Promise<void> {
  // `.git` is the workspace's own directory (workspaceRepository), so this is its exclude file.
  const file = path.join(repo.root, ".git", "info", "exclude");
  const text = await fs.readFile(file, "utf8").catch(() => "");
  if (text.split("\n").some((line) => line.trim() === "/.stepwise/")) return;
  await fs.mkdir(path.dirname(file), { recursive: true });
  await fs.appendFile(file, `${text && !text.endsWith("\n") ? "\n" : ""}/.stepwise/\n`);
}

/**
 * Adds (or finds) the worktree at `relative`, checked out on `branch` (created from `base` when
 * new). One that is in place costs no git at all; a new one one `git worktree add`.
 */
async function ensureWorktree(repo: WorkspaceRepo, relative: string, branch: string, base: string): Promise<string> {
  const absolute = path.join(repo.root, relative);
  if (await worktreeInPlace(repo, absolute)) return absolute;
  await excludeStepwiseDir(repo);
  await fs.mkdir(path.dirname(absolute), { recursive: true });
  // A directory left behind by a crash between git's steps, or removed by hand: its stale registration goes.
  await pruneOwnWorktreeRecords(repo);
  try {
    const add = ["worktree", "add", "--quiet", "-b", branch, "--end-of-options", absolute, base];
    const created = await git(repo, add, { okExitCodes: [128, 255] });
    if (created.exitCode !== 0) {
      // The branch is there already (the task was handed out before): check it out as it is.
      if (!/already exists/.test(created.stderr)) throw new GitCommandError(add, created);
      await git(repo, ["worktree", "add", "--quiet", "--end-of-options", absolute, branch]);
    }
  } catch (error) {
    // Another hand-out of the same task (or the integration checkout) made it meanwhile: fine.
    if (!(error instanceof GitCommandError)) throw error;
    if (!(await worktreeInPlace(repo, absolute))) throw error;
  }
  return absolute;
}

/** The run's integration checkout, on `stepwise/<run8>/integration` (created from HEAD the first time). */
export async function ensureIntegration(repo: WorkspaceRepo, runId: string): Promise<string> {
  return ensureWorktree(repo, worktreeRelativePath(runId, "integration"), integrationBranch(runId), "HEAD");
}

/**
 * The task's worktree, created on first use on `stepwise/<run8>/<step>` from the integration
 * branch as it is now — after the merges of every dependency, since a task is handed out only
 * when its dependencies are DONE, and DONE means merged. Returns its absolute path.
 */
export async function ensureTaskWorktree(repo: WorkspaceRepo, runId: string, stepId: string): Promise<string> {
  await ensureIntegration(repo, runId);
  return ensureWorktree(repo, worktreeRelativePath(runId, stepId), taskBranch(runId, stepId), integrationBranch(runId));
}

/** Whether the task's worktree exists (registered with git). */
export async function taskWorktreeExists(repo: WorkspaceRepo, runId: string, stepId: string): Promise<boolean> {
  const absolute = path.join(repo.root, worktreeRelativePath(runId, stepId));
  return (await listWorktrees(repo)).some((worktree) => worktree.path === absolute);
}

/**
 * Commits whatever the agent left uncommitted in its worktree (so DONE means the work is on the
 * branch). Returns whether a commit was made. An agent that committed itself leaves nothing here.
 */
export async function commitPendingWork(
  repo: WorkspaceRepo,
  runId: string,
  stepId: string,
  message: string,
  author: string,
): Promise<boolean> {
  const cwd = path.join(repo.root, worktreeRelativePath(runId, stepId));
  // One git when there is nothing to commit (an agent that committed its work itself).
  const changes = await git(repo, ["status", "--porcelain", "-z", "--untracked-files=all"], { cwd });
  if (changes.stdout === "") return false;
  await git(repo, ["add", "--all"], { cwd });
  const staged = await git(repo, ["diff", "--cached", "--quiet"], { cwd, okExitCodes: [1] });
  if (staged.exitCode === 0) return false;
  await git(repo, ["commit", "--quiet", `--message=${message}`], {
    cwd,
    env: { GIT_AUTHOR_NAME: author.slice(0, 100) || "agent", GIT_AUTHOR_EMAIL: "agent@stepwise.localhost" },
  });
  return true;
}

export type MergeOutcome =
  | { kind: "merged"; commit: string; fastForward: boolean; tip: string }
  | { kind: "up_to_date"; commit: string; tip: string }
  | { kind: "conflict"; files: string[]; message: string };

/**
 * The commit a branch of Stepwise's points to: read from its loose ref file when git keeps one
 * (as it does right after writing it), else asked of git (packed refs, another ref store).
 */
async function branchTip(repo: WorkspaceRepo, branch: string): Promise<string> {
  const file = path.join(repo.root, ".git", "refs", "heads", ...branch.split("/"));
  const handle = await fs.open(file, fs.constants.O_RDONLY | fs.constants.O_NOFOLLOW).catch(() => undefined);
  const loose = handle ? await handle.readFile("utf8").finally(() => handle.close()) : "";
  if (/^[0-9a-f]{40}([0-9a-f]{24})?\n?$/.test(loose)) return loose.trim();
  return (
    await git(repo, ["rev-parse", "--verify", "--end-of-options", `refs/heads/${branch}^{commit}`])
  ).stdout.trim();
}

/**
 * Merges the task's branch into the run's integration branch, in the integration checkout, always
 * as a merge commit (`--no-ff`): the integration branch's first-parent history is then one merge
 * per task, in the order they finished — readable as the run's dependency order. A conflict is
 * aborted (`git merge --abort`) so the integration branch is exactly as before, and the
 * conflicting files are returned. Never forced, never rewritten. What is merged is the branch's
 * commit as read before (`tip`), so the branch can later be deleted only if it is still that.
 */
export async function mergeTaskBranch(
  repo: WorkspaceRepo,
  runId: string,
  stepId: string,
  message: string,
): Promise<MergeOutcome> {
  const cwd = await ensureIntegration(repo, runId);
  const before = await branchTip(repo, integrationBranch(runId));
  const tip = await branchTip(repo, taskBranch(runId, stepId));
  const result = await git(repo, ["merge", "--no-edit", "--no-ff", `--message=${message}`, "--end-of-options", tip], {
    cwd,
    okExitCodes: [1, 2, 128],
  });
  if (result.exitCode === 0) {
    // `--no-ff` makes a merge commit unless the branch is merged already ("Already up to date"),
    // which leaves the integration branch where it was: never a fast-forward.
    const after = await branchTip(repo, integrationBranch(runId));
    return after === before
      ? { kind: "up_to_date", commit: before, tip }
      : { kind: "merged", commit: after, fastForward: false, tip };
  }
  const unmerged = await git(repo, ["diff", "--name-only", "--diff-filter=U", "-z"], { cwd });
  const files = unmerged.stdout.split("\0").filter(Boolean);
  // Whatever happened, the integration checkout goes back to exactly where it was.
  await git(repo, ["merge", "--abort"], { cwd, okExitCodes: [128] });
  await git(repo, ["reset", "--hard", "--quiet", before], { cwd });
  return { kind: "conflict", files, message: (result.stderr || result.stdout).trim().slice(0, 2_000) };
}

/**
 * After a merge: the task's worktree and its (now merged) branch go. With the commit that was
 * merged (`mergedTip`), the branch is deleted only while it still points there (`update-ref -d`
 * with the expected value: a commit made after the merge keeps it), which leaves the repository's
 * configuration untouched; without, `branch -d`, which refuses an unmerged branch.
 */
export async function removeTaskWorktree(
  repo: WorkspaceRepo,
  runId: string,
  stepId: string,
  mergedTip?: string,
): Promise<void> {
  const absolute = path.join(repo.root, worktreeRelativePath(runId, stepId));
  if ((await listWorktrees(repo)).some((worktree) => worktree.path === absolute)) {
    await git(repo, ["worktree", "remove", "--force", "--end-of-options", absolute]);
  }
  if (mergedTip) {
    await git(repo, ["update-ref", "-d", `refs/heads/${taskBranch(runId, stepId)}`, mergedTip], { okExitCodes: [1] });
    return;
  }
  // In the integration checkout: `-d` deletes only a branch merged into HEAD, and HEAD there is the
  // integration branch (in the person's checkout it would be their own branch).
  await git(repo, ["branch", "-d", "--end-of-options", taskBranch(runId, stepId)], {
    cwd: path.join(repo.root, worktreeRelativePath(runId, "integration")),
    okExitCodes: [1],
  });
}

/**
 * Removes every worktree of the run (the integration checkout too) — only those at Stepwise's own
 * place for this run, never a worktree a person made — and prunes git's records of them. The
 * branches stay: the integration branch is the run's result, an unmerged task branch is work a
 * person may still want, and deleting either would lose commits.
 */
export async function removeRunWorktrees(repo: WorkspaceRepo, runId: string): Promise<string[]> {
  const prefix = path.join(repo.root, WORKTREES_DIR, `${runShort(runId)}-`);
  const removed: string[] = [];
  for (const worktree of await listWorktrees(repo)) {
    if (!worktree.path.startsWith(prefix) || worktree.path.slice(prefix.length).includes("/")) continue;
    await git(repo, ["worktree", "remove", "--force", "--end-of-options", worktree.path]).catch((error: unknown) => {
      if (!(error instanceof GitCommandError)) throw error;
    });
    removed.push(worktree.path);
  }
  await pruneOwnWorktreeRecords(repo);
  return removed;
}

/**
 * `git worktree prune`, for Stepwise's own worktrees only. Git runs in the sandbox, which shows it
 * the workspace alone: a worktree a person keeps elsewhere looks missing there, and git's own prune
 * would drop its registration. So the records are read here, and one is removed only when it names
 * a place under Stepwise's worktree folder that no longer exists.
 */
async function pruneOwnWorktreeRecords(repo: WorkspaceRepo): Promise<void> {
  const records = path.join(repo.root, ".git", "worktrees");
  const ours = `${path.join(repo.root, WORKTREES_DIR)}/`;
  for (const name of await fs.readdir(records).catch(() => [] as string[])) {
    const gitFile = (await fs.readFile(path.join(records, name, "gitdir"), "utf8").catch(() => "")).trim();
    if (!gitFile.startsWith(ours)) continue;
    if (await fs.stat(path.dirname(gitFile)).catch(() => undefined)) continue;
    await fs.rm(path.join(records, name), { recursive: true, force: true });
  }
}

/** Run ids (short) that have worktrees in this repository, for the sweep of finished runs. */
export async function runsWithWorktrees(repo: WorkspaceRepo): Promise<string[]> {
  const dir = path.join(repo.root, WORKTREES_DIR);
  const shorts = new Set<string>();
  for (const worktree of await listWorktrees(repo)) {
    if (path.dirname(worktree.path) !== dir) continue;
    const short = /^([a-z0-9]{8})-/.exec(path.basename(worktree.path))?.[1];
    if (short) shorts.add(short);
  }
  return [...shorts];
}
