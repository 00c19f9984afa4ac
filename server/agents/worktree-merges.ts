import fs from "node:fs/promises";
import path from "node:path";
import { GitCommandError, type GitOutput } from "../tools/git";
import {
  ensureIntegration,
  git,
  gitScript,
  integrationBranch,
  taskBranch,
  worktreeRelativePath,
  type WorkspaceRepo,
} from "./worktrees";

/**
 * A task's work onto the run's integration branch (see worktrees.ts for the layout): what the
 * agent left uncommitted is committed in its worktree, then its branch merged, never forced.
 */

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

/** The commit a task's branch points to. */
export function taskBranchTip(repo: WorkspaceRepo, runId: string, stepId: string): Promise<string> {
  return branchTip(repo, taskBranch(runId, stepId));
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
  return mergeOutcome(repo, runId, { cwd, before, tip, result });
}

/** What a `merge` of `tip` into the integration checkout at `before` came to (see mergeTaskBranch). */
async function mergeOutcome(
  repo: WorkspaceRepo,
  runId: string,
  merge: { cwd: string; before: string; tip: string; result: GitOutput },
): Promise<MergeOutcome> {
  const { cwd, before, tip, result } = merge;
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
 * `commitPendingWork` and then `mergeTaskBranch`, in one sandboxed launch instead of two or more
 * (a DONE without verifiers, issue 38 item 6). The script is fixed; the places, branch, messages
 * and author come as arguments. Each git gets the hardened configuration as one `git` call would
 * (tools/git.ts, `runGitScript`). It stops before the merge if committing fails (exit 90–93: an
 * error, nothing merged); otherwise it prints whether it committed and the commit it merges —
 * the branch's tip read after its own commit, so what is merged is exactly what it names — and
 * ends with the merge's exit code. A conflict is undone as `mergeTaskBranch` undoes it.
 */
const COMMIT_AND_MERGE = `set -u
git=$1 worktree=$2 integration=$3 branch=$4 tip=$5 commit_message=$6 merge_message=$7 author=$8
g() { "$git" --literal-pathspecs --no-pager "$@"; }
committed=0
changes=$(cd -- "$worktree" && g status --porcelain --untracked-files=all) || exit 90
if [ -n "$changes" ]; then
  (cd -- "$worktree" && g add --all) || exit 91
  (cd -- "$worktree" && g diff --cached --quiet)
  case $? in
    0) ;;
    1) (cd -- "$worktree" && GIT_AUTHOR_NAME=$author GIT_AUTHOR_EMAIL=agent@stepwise.localhost \
         g commit --quiet --message="$commit_message") || exit 92
       committed=1
       tip=$(g rev-parse --verify --end-of-options "refs/heads/$branch^{commit}") || exit 93 ;;
    *) exit 91 ;;
  esac
fi
printf '%s\n%s\n' "$committed" "$tip"
cd -- "$integration" || exit 90
g merge --no-edit --no-ff --message="$merge_message" --end-of-options "$tip" >&2
`;

export async function commitAndMergeTaskBranch(
  repo: WorkspaceRepo,
  runId: string,
  stepId: string,
  messages: { commit: string; merge: string; author: string },
): Promise<{ committed: boolean; merge: MergeOutcome }> {
  const worktree = path.join(repo.root, worktreeRelativePath(runId, stepId));
  const cwd = await ensureIntegration(repo, runId);
  const before = await branchTip(repo, integrationBranch(runId));
  const branch = taskBranch(runId, stepId);
  const tipBefore = await branchTip(repo, branch);
  const author = messages.author.slice(0, 100) || "agent";
  const args = [worktree, cwd, branch, tipBefore, messages.commit, messages.merge, author];
  const result = await gitScript(repo, "commit-and-merge", COMMIT_AND_MERGE, args, { cwd, okExitCodes: [1, 2, 128] });
  const [committed, tip] = result.stdout.split("\n");
  if (!/^[0-9a-f]{40}([0-9a-f]{24})?$/.test(tip ?? "")) throw new GitCommandError(["commit-and-merge"], result);
  return { committed: committed === "1", merge: await mergeOutcome(repo, runId, { cwd, before, tip: tip!, result }) };
}
