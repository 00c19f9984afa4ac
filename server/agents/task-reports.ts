import type pg from "pg";
import { inTransaction, withAdvisoryLock } from "../db";
import { appendEvents } from "../events/store";
import type { AppContext } from "../services";
import { updateAgentTasks, type AgentTaskUpdate } from "../engine/engine";
import { isAppError } from "../errors";
import { logger } from "../logger";
import type { StepStatus } from "../plan-schema";
import { verifierCommands } from "../tools/agent-task";
import { actorKindOf, withCaller } from "../caller-context";
import type { IdentityKind } from "../vocabulary";
import type { Identity } from "../identity";
import { authorizeSessionWork } from "./session-authority";
import { principalNow } from "../policy/facts";
import { decideCallNow } from "../policy/call-now";
import type { Resource } from "../policy/authority";
import { MISSED_BEATS } from "../engine/queue-locks";
import { liveWorkerSql } from "../engine/served-workspaces";
import { withSessionLock } from "./leases";
import { refuseOthersTasks, settleLeases } from "./lease-updates";
import { openSignals } from "./signal-store";
import { alertSession, clearSignal } from "./session-signals";
import { findSession, type SessionRow } from "./sessions";
import { loadSession, type Loaded } from "./session-state";
import { finishingUpdates, prepareTaskUpdates, type PreparedUpdates } from "./task-integration";
import { taskLabel } from "./task-ref";
import { taskWorktreeInPlace, workspaceRepository } from "./worktrees";
import { makeWorktreesOfTasksReadyAfter, tasksReadyAfter } from "./worktrees-ahead";
import { queueCallIn, sendToWorker, type WorkspacePlace } from "./workspace-calls";
import { ReportOutdated, reportStillWanted, stopSince, watchReportStopped } from "./report-stops";
import { afterTaskUpdatesIn, worktreesAhead, type CallSession } from "./workspace-work";

/*
 * A DONE that has work behind it — the task's worktree to commit and merge into the run's
 * integration branch, its verifiers to run — is integrated off the agent's call (issue 38, item
 * 6). The call records a report (`agent_task_reports`) and queues its integration as a workspace
 * call (a row and a job on the workspace's own queue task, so it runs on a worker serving the
 * workspace and survives a restart); it answers at once. Until the outcome is recorded the task
 * stays running and agents see it as `merging`: it is nobody's to take, its lease does not run
 * out, and the tasks after it wait, exactly as they waited for the call before. The worker then
 * does what the call did: commit, verify, merge, and record DONE — or TODO with the findings, or
 * a blocker naming the conflicting files — and it makes the worktrees of the tasks the DONE makes
 * ready before it records it, so their hand-outs start no git. A DONE without such work (a plain
 * directory, no verifiers) is recorded in the call as before.
 */

type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

const log = logger.child({ component: "agent-task-reports" });

/** A report with no integration under way is sent again this long after it was last sent. */
const STALLED_AFTER_SECONDS = 30;
/** Integrations tried per report before the agent is told to report DONE again. */
const MAX_ATTEMPTS = 5;

/** The reporter may no longer work the session: raised by `authorize`, at the moment of an effect. */
class ReporterRefused extends Error {}

/** The operation a report came through, as the policy's `operation.call` asks about it. */
export type OperationCallers = Pick<NonNullable<Resource["operation"]>, "name" | "callers" | "role">;

/** The DONE updates that have integration work behind them: those go off the call. */
export async function doneUpdatesToIntegrateLater(
  session: CallSession,
  loaded: Pick<Loaded, "steps" | "statuses">,
  updates: AgentTaskUpdate[],
  place: WorkspacePlace | undefined,
): Promise<AgentTaskUpdate[]> {
  const byId = new Map(loaded.steps.map((step) => [step.id, step]));
  const finishing = finishingUpdates(byId, loaded.statuses, updates);
  if (finishing.length === 0 || place === undefined) return [];
  // Where a worker has the workspace, whether a worktree is there is the worker's to find.
  if (place === "worker") return finishing;
  const repo = await workspaceRepository(session.workspace_root);
  const later: AgentTaskUpdate[] = [];
  for (const update of finishing) {
    const step = byId.get(update.stepId)!;
    const verifying = verifierCommands(step.args).length > 0;
    if (verifying || (repo && (await taskWorktreeInPlace(repo, session.run_id, step.id)))) later.push(update);
  }
  return later;
}

/**
 * Records the reports and queues their integration. A report already made (an agent retrying an
 * update whose answer it lost) is kept as it is. A task another agent holds is refused first.
 */
export async function recordReports(
  app: App,
  session: CallSession,
  reporter: { actor: string; credential: string | null; operation: OperationCallers },
  reports: AgentTaskUpdate[],
): Promise<void> {
  const { actor } = reporter;
  if (reports.length === 0) return;
  await withSessionLock(app, session.id, async (client) => {
    if (actorKindOf(actor) === "agent") {
      await refuseOthersTasks(
        client,
        session.id,
        actor,
        reports.map((report) => report.stepId),
      );
    }
    for (const report of reports) {
      const made = await client.query(
        `insert into agent_task_reports (session_id, step_id, run_id, actor, actor_kind, credential, operation, note, items)
         values ($1, $2, $3, $4, $5, $6, $7, $8, $9) on conflict (session_id, step_id) do nothing`,
        [
          session.id,
          report.stepId,
          session.run_id,
          actor,
          actorKindOf(actor),
          reporter.credential,
          JSON.stringify(reporter.operation),
          report.note ?? null,
          report.items === undefined ? null : JSON.stringify(report.items),
        ],
      );
      // Its integration is queued with it: both commit, or neither. A report made already keeps its own.
      if (made.rowCount === 1) {
        await queueCallIn(client, { kind: "finish_report", session, stepId: report.stepId });
        await appendReportEvent(client, session.run_id, report.stepId, {
          type: "task.reported",
          data: { agent: actor },
        });
      }
    }
  });
}

interface ReportRow {
  actor: string;
  actor_kind: IdentityKind;
  credential: string | null;
  operation: OperationCallers;
  note: string | null;
  items: unknown[] | null;
  attempts: number;
}

/**
 * On a worker serving the workspace: the report's integration and its outcome recorded. The
 * report is gone once that outcome is (a second run finds none and does nothing); a run that
 * stopped half-way is done again whole — the commit finds nothing pending, the merge finds the
 * branch merged already.
 */
export async function finishReport(app: App, call: CallSession, stepId: string): Promise<void> {
  const taken = await app.db.pool.query<ReportRow>(
    `update agent_task_reports set attempts = attempts + 1
      where session_id = $1 and step_id = $2
      returning actor, actor_kind, credential, operation, note, items, attempts`,
    [call.id, stepId],
  );
  const report = taken.rows[0];
  if (!report) return;
  // The outcome is the reporter's, recorded and audited as theirs, not the worker's.
  await withCaller({ kind: report.actor_kind, name: report.actor }, () => integrateReport(app, call, stepId, report));
}

async function integrateReport(app: App, call: CallSession, stepId: string, report: ReportRow): Promise<void> {
  const session = await findSession(app, call.id);
  const loaded = await loadSession(app, session);
  const update: AgentTaskUpdate = {
    stepId,
    status: "DONE",
    ...(report.note !== null && { note: report.note }),
    ...(report.items !== null && { items: report.items }),
  };
  let prepared: PreparedUpdates;
  // A cancel or skip meanwhile ends it: before each effect, and a verifier under way within a second.
  const stopped = watchReportStopped(app.db.pool, session.run_id, stepId);
  try {
    await reportStillWanted(app.db.pool, session.run_id, stepId);
    prepared = await prepareTaskUpdates(app.db.pool, {
      runId: session.run_id,
      steps: loaded.steps,
      statuses: loaded.statuses,
      updates: [update],
      actor: report.actor,
      tools: app.tools,
      stop: stopped.signal,
      // Asked again before each effect, at its moment: a reporter revoked since merges nothing.
      authorize: async () => {
        await reportStillWanted(app.db.pool, session.run_id, stepId);
        await reporterMayStill(app, session, report);
      },
    });
  } catch (error) {
    // A failure after a stop is the stop: a cancel removes the run's worktrees under a git at work.
    const stop = error instanceof ReportOutdated ? error : await stopSince(app.db.pool, session.run_id, stepId);
    if (stop) return dropReport(app, session, stepId, stop.message);
    const refused = error instanceof ReporterRefused;
    // A refusal that trying again cannot change (the reporter's authority, the repository's scan
    // finding a way out) ends the report, said where people and agents look; anything else is
    // tried again by the sweep.
    if (!refused && !(isAppError(error) && error.code === "forbidden")) throw error;
    await dropReport(
      app,
      session,
      stepId,
      refused ? `the reporter was refused: ${error.message}` : (error as Error).message,
    );
    await alertSession(app, {
      sessionId: session.id,
      alert: refused
        ? {
            id: `report_refused_${stepId}`,
            level: "warning",
            message:
              `Task ${taskLabel(stepId)} was reported DONE by ${report.actor}, who may no longer work this session ` +
              `(${error.message}); nothing was merged. The task returns to the ready tasks when its lease runs out.`,
          }
        : {
            id: `integration_failed_${stepId}`,
            level: "blocker",
            message: `Stepwise did not merge task ${taskLabel(stepId)}: ${(error as Error).message} Clear this signal once that is fixed, then report the task DONE again.`,
          },
      actor: "stepwise",
    });
    return;
  } finally {
    stopped.end();
  }
  // One run's outcomes are recorded one at a time, each reading the states the one before left:
  // two DONEs integrated side by side would each see the other's task still running, and neither
  // would make the worktree of a task waiting for both.
  await withAdvisoryLock(app.db.pool, `stepwise-report-record:${session.run_id}`, async () => {
    if (prepared.updates.some((applied) => applied.status === "DONE")) {
      const statuses = await stepStatuses(app.db.pool, session.run_id);
      // Worktrees of what this DONE makes ready, before it is recorded: their hand-outs find them in place.
      await makeWorktreesOfTasksReadyAfter(session, tasksReadyAfter(loaded.steps, statuses, stepId));
    }
    try {
      await recordPrepared(app, session, loaded, prepared, { actor: report.actor, report: stepId });
    } catch (error) {
      // Refused now (the run was cancelled, the task skipped since): the report ends, said so.
      if (!isAppError(error)) throw error;
      await dropReport(app, session, stepId, error.message);
      log.warn({ err: error.message, stepId }, "a reported DONE could not be recorded");
    }
  });
}

async function stepStatuses(pool: pg.Pool, runId: string): Promise<Map<string, StepStatus>> {
  const rows = await pool.query<{ step_id: string; status: StepStatus }>(
    "select step_id, status from run_steps where run_id = $1",
    [runId],
  );
  return new Map(rows.rows.map((row) => [row.step_id, row.status]));
}

/**
 * What the report's call was asked, asked again of the one policy with the reporter as they stand
 * now, by the same function the doors ask (`decideCallNow`, recheck: the credential that proved
 * the report looked up again, the role read again, an agent's plan mode read now), after what
 * only a stored report needs: a reporter without a named credential read by name, so a principal
 * revoked or demoted since counts as such. Then, for an agent, `session.work` under that credential.
 */
async function reporterMayStill(app: App, session: SessionRow, report: ReportRow): Promise<void> {
  const pool = app.db.pool;
  const principal = await principalNow(pool, report.actor, report.actor_kind);
  const reporter: Identity =
    principal.kind === "person"
      ? { kind: "person", name: report.actor, role: principal.role }
      : { kind: principal.kind === "agent" ? "agent" : "system", name: report.actor };
  const decided = await decideCallNow(
    pool,
    app.engine.authority,
    { ...report.operation, readOnly: false, planModeConversation: false },
    report.credential ? { ...reporter, tokenId: report.credential } : reporter,
    { recheck: true, revoked: principal.kind !== "system" && principal.revoked === true },
  );
  if (!decided.identity) throw new ReporterRefused("the credential it reported with has been revoked");
  if (!decided.allowed) throw new ReporterRefused(decided.decision?.reason ?? "the policy refuses it now");
  await authorizeSessionWork(app, session, report.actor, report.credential).catch((error: unknown) => {
    throw new ReporterRefused(error instanceof Error ? error.message : String(error));
  });
}

async function dropReport(app: Pick<App, "db">, session: SessionRow, stepId: string, reason: string): Promise<void> {
  await inTransaction(app.db.pool, async (client) => {
    const ended = await client.query("delete from agent_task_reports where session_id = $1 and step_id = $2", [
      session.id,
      stepId,
    ]);
    if (ended.rowCount === 0) return;
    await appendReportEvent(client, session.run_id, stepId, {
      type: "task.report_ended",
      data: { outcome: "dropped", reason },
    });
  });
}

/**
 * A report's start or end in its run's stream, in the transaction that makes or ends it: a person's
 * run page shows the task as merging from the one to the other (run-state.ts).
 */
async function appendReportEvent(
  client: pg.PoolClient,
  runId: string,
  stepId: string,
  event:
    | { type: "task.reported"; data: { agent: string } }
    | { type: "task.report_ended"; data: { outcome: "recorded" | "dropped"; reason?: string } },
): Promise<void> {
  const run = await client.query<{ plan_id: string; trace_id: string }>(
    "select plan_id, trace_id from runs where id = $1",
    [runId],
  );
  const { plan_id: planId, trace_id: traceId } = run.rows[0]!;
  await appendEvents(client, { streamId: runId, planId, runId, traceId }, [{ ...event, stepId }]);
}

/**
 * What the integration decided, recorded — the call's own DONEs and the worker's alike. With
 * `report`, only while the report is still there (it goes in the same transaction); a conflict
 * becomes a blocker signal; the tasks made ready get their worktrees, merged ones lose theirs.
 */
export async function recordPrepared(
  app: App,
  session: SessionRow,
  loaded: Pick<Loaded, "steps" | "approverNotes">,
  prepared: PreparedUpdates,
  options: { actor: string; adoptVersion?: number; report?: string },
): Promise<void> {
  const { actor, adoptVersion, report } = options;
  const byAgent = actorKindOf(actor) === "agent";
  // A conflict the merge resolved is cleared before the task's DONE is recorded: that DONE may
  // finish the run, and a person's live view stops following a finished run's events.
  if (prepared.resolved.length > 0) {
    const open = new Set((await openSignals(app.db.pool, session.id)).map((signal) => signal.id));
    for (const key of prepared.resolved.filter((key) => open.has(key)))
      await clearSignal(app, session, key, "stepwise");
  }
  const changes = prepared.updates.length > 0 || adoptVersion !== undefined;
  if (changes || report !== undefined) {
    // Under the session's hand-out lock: checked again (a hand-out may have come between), and the
    // leases follow the reported states (DONE ends one, IN_PROGRESS takes an unheld task).
    const recorded = await withSessionLock(app, session.id, async (client) => {
      if (report !== undefined) {
        const deleted = await client.query(
          "delete from agent_task_reports where session_id = $1 and step_id = $2 returning 1",
          [session.id, report],
        );
        if (deleted.rowCount === 0) return false;
      }
      // Last in the transaction: the event takes the run stream's lock, which the engine's own
      // transaction below (another connection) needs for its events while this one waits for it.
      const ended = { type: "task.report_ended", data: { outcome: "recorded" } } as const;
      const reportEnded = async () => report !== undefined && appendReportEvent(client, session.run_id, report, ended);
      if (!changes) return reportEnded().then(() => true);
      if (byAgent) {
        await refuseOthersTasks(
          client,
          session.id,
          actor,
          prepared.updates.map((update) => update.stepId),
        );
      }
      await updateAgentTasks(app.engine, { runId: session.run_id, updates: prepared.updates, actor, adoptVersion });
      await settleLeases(app, client, session, actor, prepared.updates, loaded);
      await reportEnded();
      return true;
    });
    if (!recorded) return;
  }
  // Tasks this update made ready (or added) get their worktrees before an agent asks for them.
  // A report's integration made them already, before recording it; looking again now would only
  // compete with the hand-out that recording just allowed (the next hand-out looks anyway). An
  // IN_PROGRESS makes nothing ready: the hand-out before it already looked.
  const mayMakeReady = adoptVersion !== undefined || prepared.updates.some((update) => update.status !== "IN_PROGRESS");
  if (mayMakeReady && report === undefined) worktreesAhead(app, session);
  await afterTaskUpdatesIn(app, session, {
    updates: prepared.updates,
    merged: prepared.merged,
    mergedTips: prepared.mergedTips,
  });
  for (const conflict of prepared.conflicts) {
    await alertSession(app, {
      sessionId: session.id,
      alert: {
        id: conflict.key,
        level: "blocker",
        message: conflict.message,
        ...(conflict.taskId !== null && { task_id: conflict.taskId }),
      },
      actor: "stepwise",
    });
  }
}

/**
 * The worker's sweep (each maintenance tick): a report whose integration is not under way — its
 * call failed, or taken by a worker that stopped, or lost some other way — is sent again, for
 * the workspaces this worker serves (as its row lists them). After MAX_ATTEMPTS the report ends and a blocker tells the
 * agent why and to report DONE again.
 */
export async function resendStalledReports(app: App, workerId: string): Promise<number> {
  const stalled = await app.db.pool.query<{ session_id: string; step_id: string; attempts: number } & CallSession>(
    `select r.session_id, r.step_id, r.attempts, s.id, s.run_id, s.workspace_root
       from agent_task_reports r join agent_sessions s on s.id = r.session_id
      where exists (select 1 from workers w where w.id = $1 and s.workspace_root = any(w.workspaces))
        and r.reported_at < clock_timestamp() - make_interval(secs => $2)
        and not exists (
          select 1 from agent_workspace_calls c
           where c.kind = 'finish_report' and c.session_id = r.session_id and c.step_id = r.step_id
             and c.finished_at is null
             and (c.started_at is null or exists (
               select 1 from workers w where w.id = c.worker_id and ${liveWorkerSql(MISSED_BEATS)})))`,
    [workerId, STALLED_AFTER_SECONDS],
  );
  for (const row of stalled.rows) {
    const session: CallSession = { id: row.id, run_id: row.run_id, workspace_root: row.workspace_root };
    if (row.attempts >= MAX_ATTEMPTS) {
      const sessionRow = await findSession(app, row.session_id);
      await dropReport(app, sessionRow, row.step_id, `not merged after ${row.attempts} tries`);
      await alertSession(app, {
        sessionId: row.session_id,
        alert: {
          id: `integration_failed_${row.step_id}`,
          level: "blocker",
          message:
            `Stepwise could not commit and merge task ${taskLabel(row.step_id)} after ${row.attempts} tries ` +
            "(see the worker's log). Clear this signal once the workspace is fine, then report the task DONE again.",
        },
        actor: "stepwise",
      });
      continue;
    }
    await app.db.pool.query(
      "update agent_task_reports set reported_at = clock_timestamp() where session_id = $1 and step_id = $2",
      [row.session_id, row.step_id],
    );
    await sendToWorker(app, { kind: "finish_report", session, stepId: row.step_id });
  }
  return stalled.rows.length;
}
