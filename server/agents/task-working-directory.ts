import { ensureTaskWorktree, workspaceRepository } from "./worktrees";

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
