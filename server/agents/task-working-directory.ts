import fs from "node:fs/promises";
import path from "node:path";
import { ensureTaskWorktree, workspaceRepository, worktreeRelativePath, type WorkspaceRepo } from "./worktrees";

/**
 * Where an agent works on a task. In a workspace that is a git repository of its own (with a
 * commit), the task's own worktree — created on first ask, on branch `stepwise/<run8>/<step>`
 * from the run's integration branch (its dependencies' merged results) — so agents working in
 * parallel never share files on disk. Elsewhere the workspace root, as before.
 */
export async function taskWorkingDirectory(input: {
  workspaceRoot: string;
  runId: string;
  stepId: string;
}): Promise<string> {
  const repo = await workspaceRepository(input.workspaceRoot);
  if (!repo) return input.workspaceRoot;
  return ensureTaskWorktree(repo, input.runId, input.stepId);
}

/**
 * The same place, named without running git: the task's worktree path in a repository workspace
 * (found beforehand with `workspaceRepository`, outside any transaction). A hand-out names it
 * inside the session's locked transaction and makes it after that commits (`ensureTaskWorktree`):
 * a sandboxed git may take seconds on a busy machine, longer than a transaction may sit idle.
 */
export function plannedWorkingDirectory(
  repo: WorkspaceRepo | undefined,
  input: { workspaceRoot: string; runId: string; stepId: string },
): string {
  return repo ? path.join(repo.root, worktreeRelativePath(input.runId, input.stepId)) : input.workspaceRoot;
}

/**
 * Where a task started by an agent's IN_PROGRESS works, without running git: its worktree when one
 * was made (the update makes it before the session's transaction), else the workspace root.
 */
export async function existingWorkingDirectory(input: {
  workspaceRoot: string;
  runId: string;
  stepId: string;
}): Promise<string> {
  const root = await fs.realpath(input.workspaceRoot).catch(() => input.workspaceRoot);
  const worktree = path.join(root, worktreeRelativePath(input.runId, input.stepId));
  return (await fs.stat(worktree).catch(() => undefined))?.isDirectory() ? worktree : input.workspaceRoot;
}
