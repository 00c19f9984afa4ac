/**
 * Where an agent does a handed-out task: put in the task's brief as `workingDirectory`. For now
 * every task of a session works in the session's workspace root; giving each task its own
 * directory (a git worktree per task, say) means replacing only this function.
 */
export interface TaskPlace {
  workspaceRoot: string;
  sessionId: string;
  runId: string;
  /** The step id, `step_<n>` for task n. */
  stepId: string;
  /** The agent the task is handed to. */
  agent: string;
}

export async function taskWorkingDirectory(place: TaskPlace): Promise<string> {
  return place.workspaceRoot;
}
