import type pg from "pg";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { PLANNING_TIMEOUT_TASK } from "../queue/jobs";
import { isAppError } from "../errors";
import { appendEvents } from "../events/store";
import { loadReviewFacts, reviewStateOf } from "./review-state";
import * as store from "./session-store";
import { rejectPlan } from "./plan-rejection";

/**
 * Nothing an agent's plan mode waits for waits for ever (seed 002): a question to the person
 * (`ask_user`), the person's review of a submitted plan, and the agent itself while it gathers.
 * Each wait has a timer: a delayed job on the queue whose due time the database computes
 * (`now() + limit`, as the approval timers), so every process agrees on it and it survives
 * restarts. When it fires and the wait is still open, the wait ends in an audited cancel the
 * session page, the agent and the inbox show.
 */
export const PLAN_REVIEW_TIMEOUT_TASK = "plan_review_timeout";
export const PLANNING_IDLE_TIMEOUT_TASK = "planning_idle_timeout";

type Env = Record<string, string | undefined>;
type Client = Pick<pg.ClientBase, "query">;

export interface WaitLimits {
  /** An agent's `ask_user` question left unanswered. */
  answerMs: number;
  /** A plan an agent submitted, left without a decision. */
  reviewMs: number;
  /** An agent in plan mode that makes no tool call while gathering. */
  idleMs: number;
}

function positiveInt(env: Env, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1) throw new Error(`${name} must be a positive integer, got "${raw}"`);
  return value;
}

/** Read when a timer is set, so a changed setting applies to the next wait. */
export function waitLimits(env: Env = process.env): WaitLimits {
  return {
    answerMs: positiveInt(env, "STEPWISE_AGENT_ANSWER_TIMEOUT_MS", 30 * 60_000),
    reviewMs: positiveInt(env, "STEPWISE_PLAN_REVIEW_TIMEOUT_MS", 30 * 60_000),
    idleMs: positiveInt(env, "STEPWISE_PLANNING_IDLE_TIMEOUT_MS", 60 * 60_000),
  };
}

/** A delayed job, due `delayMs` after the database's now; the same key replaces a waiting one. */
async function scheduleIn(
  client: Client,
  job: { task: string; payload: Record<string, unknown>; key: string; delayMs: number },
): Promise<void> {
  await client.query(
    `select graphile_worker.add_job($1, $2::json, run_at => now() + make_interval(secs => $3::double precision / 1000),
       job_key => $4, max_attempts => 5)`,
    [job.task, JSON.stringify(job.payload), job.delayMs, job.key],
  );
}

export const answerTimerKey = (questionId: string) => `planning-timeout:${questionId}`;
export const reviewTimerKey = (planId: string, version: number) => `plan-review:${planId}:${version}`;
export const idleTimerKey = (sessionId: string) => `planning-idle:${sessionId}`;

/** The agent's question: the planner's own answer timer (session-jobs.ts) ends it, with this limit. */
export function scheduleAnswerTimeout(client: Client, input: { sessionId: string; questionId: string }) {
  const timeoutMs = waitLimits().answerMs;
  return scheduleIn(client, {
    task: PLANNING_TIMEOUT_TASK,
    payload: { ...input, timeoutMs },
    key: answerTimerKey(input.questionId),
    delayMs: timeoutMs,
  });
}

export function scheduleReviewTimeout(client: Client, input: { sessionId: string; planId: string; version: number }) {
  const timeoutMs = waitLimits().reviewMs;
  return scheduleIn(client, {
    task: PLAN_REVIEW_TIMEOUT_TASK,
    payload: { ...input, timeoutMs },
    key: reviewTimerKey(input.planId, input.version),
    delayMs: timeoutMs,
  });
}

/**
 * The agent did something in plan mode: its idle time starts again. The timer is re-armed under
 * the same key, so only the last call's timer remains.
 */
export async function touchPlanMode(client: Client, sessionId: string): Promise<void> {
  if (!(await store.touchActivity(client, sessionId))) return;
  const timeoutMs = waitLimits().idleMs;
  await scheduleIn(client, {
    task: PLANNING_IDLE_TIMEOUT_TASK,
    payload: { sessionId, timeoutMs },
    key: idleTimerKey(sessionId),
    delayMs: timeoutMs,
  });
}

function minutes(ms: number): string {
  if (ms < 60_000) return `${Math.max(1, Math.round(ms / 1000))} seconds`;
  const count = Math.round(ms / 60_000);
  return `${count} minute${count === 1 ? "" : "s"}`;
}

async function emit(client: Client, session: { id: string; trace_id: string }, type: string, data: object) {
  await appendEvents(client, { streamId: session.id, planId: session.id, runId: null, traceId: session.trace_id }, [
    { type, data } as never,
  ]);
}

/**
 * The person did not decide on the agent's plan in time: the plan is rejected as timed out (the
 * agent's plan_review_status says so, with the reason), and its planning session ends. A version
 * that was decided, replaced, or sent back for changes meanwhile is left alone.
 */
export async function timeOutPlanReview(
  pool: pg.Pool,
  job: { sessionId: string; planId: string; version: number; timeoutMs: number },
): Promise<void> {
  const waiting = await pool.query<{ trace_id: string }>(
    "select s.trace_id from planning_sessions s where s.id = $1 and s.plan_id = $2 and s.status = 'completed'",
    [job.sessionId, job.planId],
  );
  const session = waiting.rows[0];
  if (!session) return;
  // Still waiting for a decision on that version: the same rule as the inbox's and plan_review_status'.
  const facts = (await loadReviewFacts(pool, [{ planId: job.planId, version: job.version }])).get(job.planId);
  if (!facts || reviewStateOf(facts).state !== "awaiting_review") return;
  const message = `Nobody reviewed the plan within ${minutes(job.timeoutMs)}; it was rejected as timed out.`;
  try {
    // With the rejection, in its transaction: the session says why, and the timeout is audited.
    await rejectPlan(
      pool,
      { planId: job.planId, version: job.version, actor: "stepwise", reason: message },
      async (client) => {
        // The rejection ended the agent's session; it records why.
        await store.recordReviewTimeout(client, job.sessionId, timeoutFailure(message, "review_timeout"));
        await recordAudit(client, {
          actor: "stepwise",
          action: "plan.review_timed_out",
          planId: job.planId,
          planVersion: job.version,
          detail: { sessionId: job.sessionId, timeoutMs: job.timeoutMs, message },
        });
        await emit(client, { id: job.sessionId, trace_id: session.trace_id }, "planning.cancelled", { by: "stepwise" });
      },
    );
  } catch (error) {
    // Decided in the same instant by a person: their decision stands.
    if (isAppError(error)) return;
    throw error;
  }
}

/** The agent made no call in plan mode for the whole limit while gathering: plan mode is cancelled. */
export async function timeOutIdlePlanning(pool: pg.Pool, job: { sessionId: string; timeoutMs: number }): Promise<void> {
  await inTransaction(pool, async (client) => {
    const message = `The agent made no call for ${minutes(job.timeoutMs)} while gathering; planning was cancelled.`;
    let row: store.SessionRef | undefined;
    try {
      row = await store.timeOutIdle(client, job.sessionId, job.timeoutMs, timeoutFailure(message, "idle_timeout"));
    } catch (error) {
      if (!store.lostRace(error)) throw error;
    }
    if (!row) {
      // Parked on a question (its own timer runs): once answered, the agent must come back within
      // the limit too, so the idle timer waits on.
      const parked = await client.query(
        "select 1 from planning_sessions where id = $1 and kind = 'external' and status = 'awaiting_answer'",
        [job.sessionId],
      );
      if (parked.rowCount) {
        await scheduleIn(client, {
          task: PLANNING_IDLE_TIMEOUT_TASK,
          payload: job,
          key: idleTimerKey(job.sessionId),
          delayMs: job.timeoutMs,
        });
      }
      return;
    }
    await recordAudit(client, {
      actor: "stepwise",
      action: "planning.timed_out",
      planId: row.planId ?? row.id,
      detail: { sessionId: row.id, reason: "idle", timeoutMs: job.timeoutMs, message },
    });
    await emit(client, { id: row.id, trace_id: row.traceId }, "planning.cancelled", { by: "stepwise" });
  });
}

function timeoutFailure(message: string, kind: string) {
  return { status: "error", error_type: "timeout", message, kind, retryable: true } as const;
}

/** The queue's handlers for these timers (the worker's planning work registers them). */
export function agentWaitTasks(pool: () => pg.Pool): Record<string, (payload: unknown) => Promise<void>> {
  return {
    [PLAN_REVIEW_TIMEOUT_TASK]: (payload) =>
      timeOutPlanReview(pool(), payload as Parameters<typeof timeOutPlanReview>[1]),
    [PLANNING_IDLE_TIMEOUT_TASK]: (payload) =>
      timeOutIdlePlanning(pool(), payload as Parameters<typeof timeOutIdlePlanning>[1]),
  };
}

/**
 * When the wait a person (or the agent) is in ends by itself: the due time of the timer that
 * applies to the session's state now, read from the queue, so the page shows what will happen.
 */
export async function planningDeadline(
  pool: pg.Pool,
  sessionId: string,
): Promise<{ kind: "answer" | "review" | "idle"; at: string } | null> {
  const rows = await pool.query<{ kind: "answer" | "review" | "idle"; run_at: Date }>(
    `select case when j.key like 'planning-timeout:%' then 'answer'
                 when j.key like 'plan-review:%' then 'review' else 'idle' end as kind, j.run_at
     from planning_sessions s
     join graphile_worker.jobs j on
          (s.status = 'awaiting_answer' and j.key in (select 'planning-timeout:' || q.id from planning_questions q
                                                      where q.session_id = s.id and q.answer is null))
       or (s.status = 'running' and s.kind = 'external' and j.key = 'planning-idle:' || s.id::text)
       or (s.status = 'completed' and s.kind = 'external' and j.key = 'plan-review:' || s.plan_id || ':' || s.result_version
           and not exists (select 1 from runs r where r.plan_id = s.plan_id and r.plan_version = s.result_version))
     where s.id = $1
     order by j.run_at limit 1`,
    [sessionId],
  );
  const row = rows.rows[0];
  return row ? { kind: row.kind, at: row.run_at.toISOString() } : null;
}
