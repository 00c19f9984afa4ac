import path from "node:path";
import type pg from "pg";
import type { AppContext } from "../services";
import type { AgentTaskUpdate } from "../engine/engine";
import { retryOnConnectionLoss } from "../database-faults";
import { AppError, isAppError } from "../errors";
import { logger } from "../logger";
import type { Step, StepStatus } from "../plan-schema";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { AGENT_WORKSPACE_TASK } from "../queue/jobs";
import { existsInWorkspace } from "../tools/workspace-path";
import type { TodoMarker } from "../planner/snapshot";
import type { NewTask } from "./contract";
import { pathsTheGatesCheck, type GateContext } from "./task-gates";
import type { QueueTask } from "../engine/queue-runner";
import { afterTaskUpdates, prepareTaskUpdates, removeWorktreesOfRun, type PreparedUpdates } from "./task-integration";
import { taskWorkingDirectory } from "./task-working-directory";
import { worktreeRelativePath, workspaceRepository, type WorkspaceRepo } from "./worktrees";
import { claimTaskWorktree, makeReadyWorktreesAhead } from "./worktrees-ahead";
import {
  AGENT_WORKSPACE_CHANNEL,
  callOnWorker,
  sendToWorker,
  workspacePlace,
  workspacePlaceIfServed,
  type CallKind,
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

const PURGE_EVERY_MS = 10 * 60_000;

/** The hand-out's git work: the task's worktree, made ahead or now (`repo` when already found here). */
async function handOutWorktree(
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

/** The DONE reports' integration (commit, verifiers, merge) where the workspace is. */
export async function integrateTaskUpdates(
  app: App,
  place: WorkspacePlace | undefined,
  session: CallSession,
  input: { steps: Step[]; statuses: Map<string, StepStatus>; updates: AgentTaskUpdate[]; actor: string },
): Promise<PreparedUpdates> {
  const local = () => prepareTaskUpdates(app.db.pool, { runId: session.run_id, ...input, tools: app.tools });
  // Without a DONE nothing touches the workspace: no worker needed.
  if (place !== "worker" || !input.updates.some((update) => update.status === "DONE")) return local();
  return callOnWorker<PreparedUpdates>(app, {
    kind: "integrate",
    session,
    input: { updates: input.updates, actor: input.actor },
  });
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
async function existingPaths(root: string, paths: string[]): Promise<Set<string>> {
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

async function todoMarkersHere(root: string): Promise<TodoMarker[]> {
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

interface CallRow {
  kind: CallKind;
  workspace_root: string;
  session_id: string;
  run_id: string;
  step_id: string | null;
  input: {
    updates?: AgentTaskUpdate[];
    actor?: string;
    merged?: string[];
    mergedTips?: Record<string, string>;
    paths?: string[];
  };
}

/**
 * The worker's task for agent workspace calls, listed once per workspace it serves
 * (`agent_workspace@<key>`, see `ExtraWork.workspaceTasks`): only a worker serving the workspace
 * takes the job.
 */
export function agentWorkspaceWork(
  app: () => App,
  worker: { workerId: string },
): { workspaceTasks: Record<string, QueueTask>; maintain(): Promise<void> } {
  const task: QueueTask = async (payload) => {
    await runAgentWorkspaceCall(app(), worker.workerId, (payload as { callId: string }).callId);
  };
  let purgedAt = 0;
  return {
    workspaceTasks: { [AGENT_WORKSPACE_TASK]: task },
    // The rows are a record of recent calls, not a history: a day is plenty to look into one.
    // Every few minutes is often enough (maintenance ticks with the heartbeat).
    maintain: async () => {
      if (Date.now() - purgedAt < PURGE_EVERY_MS) return;
      purgedAt = Date.now();
      await app().db.pool.query("delete from agent_workspace_calls where created_at < now() - interval '1 day'");
    },
  };
}

/** The calls this process is doing now: a second job for one of them takes nothing. */
const performing = new Set<string>();

/**
 * Does one call, at most once: taken only while nobody took or withdrew it — or taken again by
 * the worker that took it, when it is not doing it: its take committed, but the answer was lost
 * with the connection, and the queue's retry of the job finds it taken by itself. (Left alone, the
 * caller waited an hour for a worker that never heard it had the call.) Its outcome — the result,
 * or the error — is written on its row and announced; an error is not thrown, so the queue never
 * runs a merge twice.
 */
export async function runAgentWorkspaceCall(app: App, workerId: string, callId: string): Promise<void> {
  if (performing.has(callId)) return;
  performing.add(callId);
  try {
    await takeAndPerform(app, workerId, callId);
  } finally {
    performing.delete(callId);
  }
}

async function takeAndPerform(app: App, workerId: string, callId: string): Promise<void> {
  const taken = await app.db.pool.query<CallRow>(
    `update agent_workspace_calls set worker_id = $2, started_at = clock_timestamp()
      where id = $1 and finished_at is null and (started_at is null or worker_id = $2)
      returning kind, workspace_root, session_id, run_id, step_id, input`,
    [callId, workerId],
  );
  const call = taken.rows[0];
  if (!call) return;
  let outcome: { result: unknown } | { error: object };
  try {
    outcome = { result: (await perform(app, call)) ?? null };
  } catch (error) {
    log.warn({ err: String(error), kind: call.kind }, "agent workspace call failed");
    outcome = {
      error: isAppError(error)
        ? { message: error.message, code: error.code, details: error.details }
        : { message: error instanceof Error ? error.message : String(error) },
    };
  }
  // The outcome must reach the row (its caller waits for it): a dropped connection is waited out.
  const finish = () =>
    app.db.pool.query(
      `with done as (
       update agent_workspace_calls set finished_at = clock_timestamp(), result = $2, error = $3 where id = $1 returning id)
     select pg_notify($4, id::text) from done`,
      [
        callId,
        "result" in outcome ? JSON.stringify(outcome.result) : null,
        "error" in outcome ? JSON.stringify(outcome.error) : null,
        AGENT_WORKSPACE_CHANNEL,
      ],
    );
  await retryOnConnectionLoss(finish, { maxDelayMs: 5_000, shouldStop: () => app.engine.stopping === true });
}

/** The call's work, from the rows it names: the session, its run and the run's plan as they are now. */
async function perform(app: App, call: CallRow): Promise<unknown> {
  const session = await sessionOf(app.db.pool, call);
  switch (call.kind) {
    case "hand_out": {
      const step = (await planOf(app.db.pool, session.run_id)).steps.find((s) => s.id === call.step_id);
      if (!step || step.tool !== AGENT_TASK_TOOL) throw new AppError("not_found", `No agent task ${call.step_id}`);
      return handOutWorktree(session, step);
    }
    case "working_directory":
      return taskWorkingDirectory({
        workspaceRoot: session.workspace_root,
        runId: session.run_id,
        stepId: requiredStep(call),
      });
    case "integrate": {
      const plan = await planOf(app.db.pool, session.run_id);
      return prepareTaskUpdates(app.db.pool, {
        runId: session.run_id,
        steps: plan.steps,
        statuses: plan.statuses,
        updates: call.input.updates ?? [],
        actor: call.input.actor ?? "agent",
        tools: app.tools,
      });
    }
    case "after_updates":
      return afterTaskUpdates(app.db.pool, {
        runId: session.run_id,
        updates: call.input.updates ?? [],
        merged: call.input.merged ?? [],
        mergedTips: call.input.mergedTips ?? {},
      });
    case "ahead":
      makeReadyWorktreesAhead(app.db.pool, session);
      return null;
    case "remove_run":
      return removeWorktreesOfRun(app.db.pool, session.run_id);
    case "todo_markers":
      return todoMarkersHere(session.workspace_root);
    case "paths_exist":
      return [...(await existingPaths(session.workspace_root, call.input.paths ?? []))];
  }
}

function requiredStep(call: CallRow): string {
  if (!call.step_id) throw new AppError("invalid_input", `A ${call.kind} call names a step`);
  return call.step_id;
}

/** The session the call names, checked to be of the call's run and workspace. */
async function sessionOf(pool: pg.Pool, call: CallRow): Promise<CallSession> {
  const rows = await pool.query<CallSession>("select id, run_id, workspace_root from agent_sessions where id = $1", [
    call.session_id,
  ]);
  const session = rows.rows[0];
  if (!session || session.run_id !== call.run_id || session.workspace_root !== call.workspace_root) {
    throw new AppError("not_found", `No session ${call.session_id} of this run in ${call.workspace_root}`);
  }
  return session;
}

/** The run's plan version's steps and their states. */
async function planOf(pool: pg.Pool, runId: string): Promise<{ steps: Step[]; statuses: Map<string, StepStatus> }> {
  const [plan, states] = await Promise.all([
    pool.query<{ steps: Step[] }>(
      `select v.steps from runs r join plan_versions v on v.plan_id = r.plan_id and v.version = r.plan_version
        where r.id = $1`,
      [runId],
    ),
    pool.query<{ step_id: string; status: StepStatus }>("select step_id, status from run_steps where run_id = $1", [
      runId,
    ]),
  ]);
  return {
    steps: plan.rows[0]?.steps ?? [],
    statuses: new Map(states.rows.map((row) => [row.step_id, row.status])),
  };
}
