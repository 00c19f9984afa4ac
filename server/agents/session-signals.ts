import type { AppContext } from "../services";
import type { AuditAction } from "../audit/actions";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { pauseRunForSignal, resumeRunAfterSignal, retryStep } from "../engine/engine";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import type { NewEvent } from "../events/types";
import type { StepStatus } from "../plan-schema";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { upsertSignal } from "../engine/agent-signals";
import type { SignalLevel } from "./signal-store";
import { findSession, type SessionRow } from "./sessions";
import { loadSession, seen } from "./session-state";
import { actorKindOf } from "../caller-context";

/** Seed 003's signals on a session: an agent's `alert`, a person's clearing, and their audit trail. */
type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

export async function audit(
  app: App,
  session: SessionRow,
  actor: string,
  action: AuditAction,
  detail: object,
): Promise<void> {
  await recordAudit(app.db.pool, {
    actor,
    action,
    planId: session.plan_id,
    runId: session.run_id,
    detail: { sessionId: session.id, ...detail },
  });
}

/** Signals are not step states, but the live view shows them: they travel in the run's stream. */
async function appendRunEvent(app: App, session: SessionRow, event: NewEvent): Promise<void> {
  await inTransaction(app.db.pool, async (client) => {
    const run = await client.query<{ trace_id: string }>("select trace_id from runs where id = $1", [session.run_id]);
    await appendEvents(
      client,
      { streamId: session.run_id, planId: session.plan_id, runId: session.run_id, traceId: run.rows[0]!.trace_id },
      [event],
    );
  });
}

export type AlertInput = { id: string; level: SignalLevel; message: string; task_id?: number } | { clear: string };

/**
 * Seed 003's `alert`: raises a signal (a blocker pauses the session's run) or clears one. Clearing
 * the signal of a failed step tries that step again; clearing the last blocker resumes the run.
 */
export async function alertSession(
  app: App,
  input: { sessionId?: string; alert: AlertInput; actor: string },
): Promise<{ status: "success"; message: string }> {
  const session = await findSession(app, input.sessionId, input.actor);
  await seen(app, session, input.actor);
  const { alert } = input;
  if ("clear" in alert) return clearSignal(app, session, alert.clear, input.actor);
  if (alert.task_id !== undefined) {
    const loaded = await loadSession(app, session);
    if (!loaded.steps.some((step) => step.id === `step_${alert.task_id}`)) {
      throw new AppError("not_found", `There is no task ${alert.task_id} in this plan`);
    }
  }
  const isNew = await upsertSignal(app.db.pool, {
    sessionId: session.id,
    key: alert.id,
    taskId: alert.task_id ?? null,
    level: alert.level,
    message: alert.message,
    raisedBy: input.actor,
  });
  await audit(app, session, input.actor, "signal.raised", {
    signal: alert.id,
    level: alert.level,
    message: alert.message,
  });
  await appendRunEvent(app, session, {
    type: "signal.raised",
    stepId: alert.task_id ? `step_${alert.task_id}` : null,
    data: { id: alert.id, level: alert.level, message: alert.message, raisedBy: input.actor },
  });
  if (alert.level === "blocker") {
    await pauseRunForSignal(app.engine, { runId: session.run_id, reason: `Blocked by signal '${alert.id}'` });
  }
  return { status: "success", message: `Signal '${alert.id}' ${isNew ? "raised" : "updated"}.` };
}

export async function clearSignal(
  app: App,
  session: SessionRow,
  key: string,
  actor: string,
): Promise<{ status: "success"; message: string }> {
  const cleared = await inTransaction(app.db.pool, async (client) => {
    const rows = await client.query<{ task_id: number | null; raised_by: string }>(
      `update signals set cleared_by = $3, cleared_at = now()
       where session_id = $1 and key = $2 and cleared_at is null returning task_id, raised_by`,
      [session.id, key, actor],
    );
    return rows.rows[0];
  });
  if (!cleared) throw new AppError("not_found", `No open signal '${key}' in session ${session.id}`);
  await audit(app, session, actor, "signal.cleared", { signal: key });
  await appendRunEvent(app, session, {
    type: "signal.cleared",
    stepId: cleared.task_id === null ? null : `step_${cleared.task_id}`,
    data: { id: key, clearedBy: actor },
  });
  // A failure signal: the step that failed runs again now that the cause is fixed.
  let retried = "";
  if (cleared.raised_by === "stepwise" && cleared.task_id !== null) {
    const stepId = `step_${cleared.task_id}`;
    const status = await app.db.pool.query<{ status: StepStatus; tool: string }>(
      "select status, tool from run_steps where run_id = $1 and step_id = $2",
      [session.run_id, stepId],
    );
    const failed = status.rows[0];
    // Trying a failed step again is a person's decision, except for the agent's own task and a
    // step whose tool only reads (a check the agent's fix should now pass).
    const harmless = failed !== undefined && (failed.tool === AGENT_TASK_TOOL || app.tools.get(failed.tool)?.readOnly);
    if (failed?.status === "failed" && (actorKindOf(actor) === "person" || harmless)) {
      await retryStep(app.engine, { runId: session.run_id, stepId, actor });
      retried = ` Task ${cleared.task_id} runs again.`;
    } else if (failed?.status === "failed") {
      retried = ` Task ${cleared.task_id} stays failed until a person retries it.`;
    }
  }
  const blockers = await app.db.pool.query(
    "select 1 from signals where session_id = $1 and level = 'blocker' and cleared_at is null limit 1",
    [session.id],
  );
  if (blockers.rowCount === 0) await resumeRunAfterSignal(app.engine, { runId: session.run_id, actor });
  return { status: "success", message: `Signal '${key}' cleared.${retried}` };
}
