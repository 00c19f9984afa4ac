import type pg from "pg";
import type { AppContext } from "../services";
import type { AgentTaskUpdate } from "../engine/engine";
import { retryOnConnectionLoss } from "../database-faults";
import type { QueueTask } from "../engine/queue-runner";
import { AppError, isAppError } from "../errors";
import { logger } from "../logger";
import type { Step, StepStatus } from "../plan-schema";
import { AGENT_WORKSPACE_TASK } from "../queue/jobs";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { afterTaskUpdates, removeWorktreesOfRun } from "./task-integration";
import { finishReport, resendStalledReports } from "./task-reports";
import { taskWorkingDirectory } from "./task-working-directory";
import { makeReadyWorktreesAhead } from "./worktrees-ahead";
import { AGENT_WORKSPACE_CHANNEL, type CallKind } from "./workspace-calls";
import { existingPaths, handOutWorktree, todoMarkersHere, type CallSession } from "./workspace-work";

/*
 * The worker's side of agent workspace calls (workspace-calls.ts has the caller's): a worker
 * serving the workspace takes a call's row, does its work with the same functions the answering
 * process uses when it serves the workspace itself, and writes the outcome on the row. It trusts
 * no authority from the call: the operation decided it; the call names a session (and a step),
 * and the worker reads the session, its run, plan and steps from the database before acting.
 */

type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

const log = logger.child({ component: "agent-workspace" });

const PURGE_EVERY_MS = 10 * 60_000;

interface CallRow {
  kind: CallKind;
  workspace_root: string;
  session_id: string;
  run_id: string;
  step_id: string | null;
  input: {
    updates?: AgentTaskUpdate[];
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
    maintain: async () => {
      // Reports of DONE whose integration is not under way (their call failed, or its
      // worker gone) are sent again, each tick.
      await resendStalledReports(app(), worker.workerId);
      // The rows are a record of recent calls, not a history: a day is plenty to look into one.
      // Every few minutes is often enough (maintenance ticks with the heartbeat).
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
    case "finish_report":
      return finishReport(app, session, requiredStep(call));
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
