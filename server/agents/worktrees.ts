import fs from "node:fs/promises";
import path from "node:path";
import { GitCommandError, runGit, runGitScript } from "../tools/git";
import { repositoryForGit, workspaceRepository, type WorkspaceRepo } from "./worktree-repository";

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

export { workspaceRepository, WorkspaceUndecided, type WorkspaceRepo } from "./worktree-repository";

/** Git as every worktree operation runs it: hardened, confined, as Stepwise, with a time limit. */
export async function git(
  repo: WorkspaceRepo,
  args: string[],
  options: { cwd?: string; okExitCodes?: number[]; env?: Record<string, string> } = {},
) {
  return runGit(args, {
    cwd: options.cwd ?? repo.root,
    signal: AbortSignal.timeout(GIT_TIMEOUT_MS),
    repository: await repositoryForGit(repo),
    ...(options.okExitCodes && { okExitCodes: options.okExitCodes }),
    env: { ...IDENTITY, ...(options.env ?? {}) },
  });
}

/** A fixed script of git commands as worktree operations run each git (see `runGitScript`). */
export async function gitScript(
  repo: WorkspaceRepo,
  name: string,
  script: string,
  args: string[],
  options: { cwd?: string; okExitCodes?: number[] } = {},
) {
  return runGitScript(name, script, args, {
    cwd: options.cwd ?? repo.root,
    signal: AbortSignal.timeout(GIT_TIMEOUT_MS),
    repository: await repositoryForGit(repo),
    ...(options.okExitCodes && { okExitCodes: options.okExitCodes }),
    env: IDENTITY,
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
 * file leading to one of the repository's worktree records, and that record leads back to it. A
 * checkout removed behind Stepwise's back is not, and is made again. Two small reads, whatever the
 * number of worktrees (asked on every hand-out).
 */
async function worktreeInPlace(repo: WorkspaceRepo, absolute: string): Promise<boolean> {
  const pointer = /^gitdir:\s*(.+?)\s*$/m.exec(
    await fs.readFile(path.join(absolute, ".git"), "utf8").catch(() => ""),
  )?.[1];
  if (pointer === undefined) return false;
  const record = path.resolve(absolute, pointer);
  if (path.dirname(record) !== path.join(repo.root, ".git", "worktrees")) return false;
  const gitFile = (await fs.readFile(path.join(record, "gitdir"), "utf8").catch(() => "")).trim();
  return gitFile !== "" && path.dirname(path.resolve(record, gitFile)) === absolute;
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
  // One `worktree add` per place at a time in this process: a hand-out and the making ahead
  // (worktrees-ahead.ts) of the same task wait for one another instead of racing. A worktree
  // being added looks in place before its files are: git writes its `.git` file and record
  // first, then checks the files out. So an add under way (asked after the look, which may have
  // seen its first writes) is waited for even when the worktree looks in place.
  const inPlace = await worktreeInPlace(repo, absolute);
  const pending = adding.get(absolute);
  if (pending) return pending;
  if (inPlace) return absolute;
  const added = addWorktree(repo, absolute, branch, base).finally(() => adding.delete(absolute));
  adding.set(absolute, added);
  return added;
}

const adding = new Map<string, Promise<string>>();
const recordLocks = new Map<string, Promise<unknown>>();

/**
 * Git's changes to one repository's worktree records, one at a time in this process: a
 * `worktree add` beside another fails reading the other's half-written record.
 */
function withWorktreeRecords<T>(repo: WorkspaceRepo, work: () => Promise<T>): Promise<T> {
  const next = (recordLocks.get(repo.root) ?? Promise.resolve()).then(work, work);
  const settled = next.catch(() => undefined);
  recordLocks.set(repo.root, settled);
  void settled.then(() => recordLocks.get(repo.root) === settled && recordLocks.delete(repo.root));
  return next;
}

function addWorktree(repo: WorkspaceRepo, absolute: string, branch: string, base: string): Promise<string> {
  return withWorktreeRecords(repo, async () => {
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
  });
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

/** Whether the task's worktree is registered and its checkout there (see `worktreeInPlace`). */
export async function taskWorktreeInPlace(repo: WorkspaceRepo, runId: string, stepId: string): Promise<boolean> {
  return worktreeInPlace(repo, path.join(repo.root, worktreeRelativePath(runId, stepId)));
}

/**
 * Removes a task's worktree nobody used: only when `git status` finds nothing in it (a plain
 * `worktree remove`, left to check that itself, refused clean ones in the sandbox), and its
 * branch only while it still points at `tip`.
 */
export async function removeUnusedTaskWorktree(
  repo: WorkspaceRepo,
  runId: string,
  stepId: string,
  tip: string,
): Promise<void> {
  const cwd = path.join(repo.root, worktreeRelativePath(runId, stepId));
  const changes = await git(repo, ["status", "--porcelain", "-z", "--untracked-files=all"], { cwd });
  if (changes.stdout !== "") return;
  await withWorktreeRecords(repo, () => git(repo, ["worktree", "remove", "--force", "--end-of-options", cwd]));
  await git(repo, ["update-ref", "-d", `refs/heads/${taskBranch(runId, stepId)}`, tip], { okExitCodes: [1] });
}

/** Whether the task's worktree exists (registered with git). */
export async function taskWorktreeExists(repo: WorkspaceRepo, runId: string, stepId: string): Promise<boolean> {
  const absolute = path.join(repo.root, worktreeRelativePath(runId, stepId));
  return (await listWorktrees(repo)).some((worktree) => worktree.path === absolute);
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
  if (mergedTip) return removeMergedTaskWorktrees(repo, runId, [{ stepId, tip: mergedTip }]);
  const absolute = path.join(repo.root, worktreeRelativePath(runId, stepId));
  await withWorktreeRecords(repo, async () => {
    if (!(await listWorktrees(repo)).some((worktree) => worktree.path === absolute)) return;
    await git(repo, ["worktree", "remove", "--force", "--end-of-options", absolute]);
  });
  // In the integration checkout: `-d` deletes only a branch merged into HEAD, and HEAD there is the
  // integration branch (in the person's checkout it would be their own branch).
  await git(repo, ["branch", "-d", "--end-of-options", taskBranch(runId, stepId)], {
    cwd: path.join(repo.root, worktreeRelativePath(runId, "integration")),
    okExitCodes: [1],
  });
}

/**
 * For each (worktree, ref, tip) after the git path: `worktree remove --force`, then
 * `update-ref -d <ref> <tip>` (exit 1, moved since: kept), all in one script. It goes on past a
 * failure and ends with 1 when any removal failed (its stderr says which).
 */
const REMOVE_MERGED = `set -u
git=$1; shift
g() { "$git" --literal-pathspecs --no-pager "$@"; }
failed=0
while [ $# -ge 3 ]; do
  worktree=$1 ref=$2 tip=$3
  shift 3
  if g worktree remove --force --end-of-options "$worktree"; then
    g update-ref -d "$ref" "$tip"
    case $? in 0|1) ;; *) failed=1 ;; esac
  else
    failed=1
  fi
done
exit "$failed"
`;

/**
 * After merges: the merged tasks' worktrees, and their branches while each still points at the
 * commit merged (a commit made after the merge keeps its branch), in one sandboxed launch for all
 * of them (one per task made every merge queue a launch behind the next hand-out's worktree).
 * A worktree no longer registered needs only its branch deleted.
 */
export async function removeMergedTaskWorktrees(
  repo: WorkspaceRepo,
  runId: string,
  merged: { stepId: string; tip: string }[],
): Promise<void> {
  if (merged.length === 0) return;
  const unregistered = await withWorktreeRecords(repo, async () => {
    const registered = new Set((await listWorktrees(repo)).map((worktree) => worktree.path));
    const args: string[] = [];
    const rest: { stepId: string; tip: string }[] = [];
    for (const { stepId, tip } of merged) {
      const absolute = path.join(repo.root, worktreeRelativePath(runId, stepId));
      if (registered.has(absolute)) args.push(absolute, `refs/heads/${taskBranch(runId, stepId)}`, tip);
      else rest.push({ stepId, tip });
    }
    if (args.length > 0) await gitScript(repo, "remove-merged-worktrees", REMOVE_MERGED, args);
    return rest;
  });
  for (const { stepId, tip } of unregistered) {
    await git(repo, ["update-ref", "-d", `refs/heads/${taskBranch(runId, stepId)}`, tip], { okExitCodes: [1] });
  }
}

/**
 * Removes every worktree of the run (the integration checkout too) — only those at Stepwise's own
 * place for this run, never a worktree a person made — and prunes git's records of them. The
 * branches stay: the integration branch is the run's result, an unmerged task branch is work a
 * person may still want, and deleting either would lose commits.
 */
export function removeRunWorktrees(repo: WorkspaceRepo, runId: string): Promise<string[]> {
  return withWorktreeRecords(repo, () => removeRunWorktreesNow(repo, runId));
}

async function removeRunWorktreesNow(repo: WorkspaceRepo, runId: string): Promise<string[]> {
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
