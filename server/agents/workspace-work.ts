import path from "node:path";
import type { AppContext } from "../services";
import type { AgentTaskUpdate } from "../engine/engine";
import { logger } from "../logger";
import type { Step } from "../plan-schema";
import { existsInWorkspace } from "../tools/workspace-path";
import type { TodoMarker } from "../planner/snapshot";
import type { NewTask } from "./contract";
import { pathsTheGatesCheck, type GateContext } from "./task-gates";
import { afterTaskUpdates, removeWorktreesOfRun } from "./task-integration";
import { taskWorkingDirectory } from "./task-working-directory";
import { worktreeRelativePath, workspaceRepository, type WorkspaceRepo } from "./worktrees";
import { claimTaskWorktree, makeReadyWorktreesAhead } from "./worktrees-ahead";
import {
  callOnWorker,
  sendToWorker,
  workspacePlace,
  workspacePlaceIfServed,
  type WorkspacePlace,
} from "./workspace-calls";

/*
 * Agent workspace work, wherever it runs (issue 41): each call below runs its work here when this
 * process's own worker serves the workspace, else on a worker serving it (workspace-calls.ts).
 * Either way the same functions do the git work (`claimTaskWorktree`, `prepareTaskUpdates`, …):
 * what runs here is what the worker runs. The worker's side (`runAgentWorkspaceCall`) trusts no
 * authority from the call: the answering process decided it in the operation; the call names a
 * session (and a step), and the worker reads the session, its run, plan and steps from the
 * database before acting.
 */

type App = Pick<AppContext, "db" | "engine" | "tools">;

export interface CallSession {
  id: string;
  run_id: string;
  workspace_root: string;
}

const log = logger.child({ component: "agent-workspace" });

/** The hand-out's git work: the task's worktree, made ahead or now (`repo` when already found here). */
export async function handOutWorktree(
  session: CallSession,
  step: Step,
  found?: { repo: WorkspaceRepo | undefined },
): Promise<string> {
  const repo = found ? found.repo : await workspaceRepository(session.workspace_root);
  return repo ? claimTaskWorktree(repo, session.run_id, step) : session.workspace_root;
}

/**
 * Where a hand-out names the task's working directory before it is made, when a worker makes it:
 * the worktree's path in the workspace (it is its repository's top level, or no worktree is made;
 * the worker's answer corrects the brief then).
 */
export function plannedRemoteWorkingDirectory(session: CallSession, stepId: string): string {
  return path.join(session.workspace_root, worktreeRelativePath(session.run_id, stepId));
}

/** The task's working directory for its hand-out, made where the workspace is. */
export async function handOutWorkingDirectory(
  app: App,
  place: WorkspacePlace,
  session: CallSession,
  step: Step,
  found?: { repo: WorkspaceRepo | undefined },
): Promise<string> {
  if (place === "here") return handOutWorktree(session, step, found);
  return callOnWorker<string>(app, { kind: "hand_out", session, stepId: step.id });
}

/** The working directory of a task shown without a hand-out (made now if missing). */
export async function workingDirectoryOf(app: App, session: CallSession, stepId: string): Promise<string> {
  const input = { workspaceRoot: session.workspace_root, runId: session.run_id, stepId };
  if ((await workspacePlace(app, session.workspace_root)) === "here") return taskWorkingDirectory(input);
  return callOnWorker<string>(app, { kind: "working_directory", session, stepId });
}

/** After the updates are recorded: worktrees of tasks just taken, merged ones removed (nobody waits remotely). */
export async function afterTaskUpdatesIn(
  app: App,
  session: CallSession,
  input: { updates: AgentTaskUpdate[]; merged: string[]; mergedTips: Record<string, string> },
): Promise<void> {
  const starting = input.updates.some((update) => update.status === "IN_PROGRESS");
  if (!starting && input.merged.length === 0) return;
  const place = await workspacePlaceIfServed(app, session.workspace_root);
  if (place === "here") return afterTaskUpdates(app.db.pool, { runId: session.run_id, ...input });
  if (place === "worker") await sendToWorker(app, { kind: "after_updates", session, input });
}

/**
 * The add_tasks gates' `fileExists` for these tasks, answered where the workspace is: every path
 * the gates look up (`pathsTheGatesCheck`) at once — here, or by a worker serving the workspace
 * when this process serves none (the web process of a team server has no such folder, and named
 * every file missing). With no worker serving it, this process's own look, as before.
 */
export async function gateFileCheck(
  app: App,
  session: CallSession,
  tasks: NewTask[],
): Promise<GateContext["fileExists"]> {
  const paths = [...new Set(pathsTheGatesCheck(tasks))];
  if (paths.length === 0) return async () => false;
  const place = await workspacePlaceIfServed(app, session.workspace_root);
  const found =
    place === "worker"
      ? new Set(await callOnWorker<string[]>(app, { kind: "paths_exist", session, input: { paths } }))
      : await existingPaths(session.workspace_root, paths);
  return async (relativePath) => found.has(relativePath);
}

/** Which of these workspace-relative paths exist in the workspace (a path leading out of it does not). */
export async function existingPaths(root: string, paths: string[]): Promise<Set<string>> {
  const found = await Promise.all(
    paths.map(async (relativePath) => ((await existsInWorkspace(root, relativePath)) ? [relativePath] : [])),
  );
  return new Set(found.flat());
}

/**
 * The TODO/FIXME markers of the workspace's files (seed 003's `suggest`), read where the workspace
 * is: here, or by a worker serving it when this process serves none. With no worker serving it,
 * this process's own look, as before.
 */
export async function workspaceTodoMarkers(app: App, session: CallSession): Promise<TodoMarker[]> {
  if ((await workspacePlaceIfServed(app, session.workspace_root)) === "worker") {
    return callOnWorker<TodoMarker[]>(app, { kind: "todo_markers", session });
  }
  return todoMarkersHere(session.workspace_root);
}

export async function todoMarkersHere(root: string): Promise<TodoMarker[]> {
  const { findTodoMarkers } = await import("../planner/snapshot");
  return findTodoMarkers(root, 20);
}

/** The ready tasks' worktrees, made ahead of their hand-out where the workspace is (fire and forget). */
export function worktreesAhead(app: App, session: CallSession): void {
  if (app.engine.localWorker?.servesWorkspace?.(session.workspace_root)) {
    makeReadyWorktreesAhead(app.db.pool, session);
    return;
  }
  void workspacePlaceIfServed(app, session.workspace_root)
    .then((place) => (place ? sendToWorker(app, { kind: "ahead", session }) : undefined))
    .catch((error: unknown) => log.warn({ err: String(error) }, "could not ask for worktrees ahead"));
}

/**
 * A cancelled or aborted run's worktrees go, where the workspace is: here, or — not waited for,
 * as the removal is best effort anyway — on a worker serving it. Runs without an agent session
 * have no worktrees; their removal stays a look at this process's disk, as before.
 */
export async function removeWorktreesOfRunIn(engine: AppContext["engine"], runId: string): Promise<void> {
  const rows = await engine.pool.query<CallSession>(
    "select s.id, s.run_id, s.workspace_root from agent_sessions s where s.run_id = $1 limit 1",
    [runId],
  );
  const session = rows.rows[0];
  const app = { db: { pool: engine.pool }, engine };
  const place = session ? await workspacePlaceIfServed(app, session.workspace_root) : "here";
  if (place === "here") await removeWorktreesOfRun(engine.pool, runId);
  else if (place === "worker" && session) await sendToWorker(app, { kind: "remove_run", session });
}
