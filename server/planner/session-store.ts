import type pg from "pg";
import { AppError } from "../errors";
import type { PlanningSessionStatus } from "../vocabulary";
import {
  lostRace,
  STATUS_WORDS,
  TRANSITIONS,
  type RefusedTransition,
  type TransitionName,
} from "./session-transitions";

export { lostRace, TRANSITIONS, type RefusedTransition, type TransitionName } from "./session-transitions";

/**
 * The one writer of `planning_sessions` rows (a test, session-store-owner.test.ts, refuses any
 * other). The built-in planner's loop, an agent's plan mode, the timers and a plan's rejection all
 * change a session through these functions, so the status a session may move from is written once,
 * in TRANSITIONS, and checked by the same statement that moves it:
 * `update … where id = $1 and status = any($allowed) returning …`. A session in another status is
 * refused with `invalid_state` and left as it was; a caller that can lose a race to a cancel (the
 * loop finishing while the person cancels) asks `lostRace(error)` and stops.
 *
 * Besides its status a session carries its loop's lease (worker_id: the worker running the loop)
 * and the loop's progress (phase, loop_state, draft). Those writes are here too; each holds only
 * while the caller's worker holds the lease, and answers whether it still did.
 */

type Client = Pick<pg.ClientBase, "query">;

/** What a transition returns: enough to audit the change and emit its event. */
export interface SessionRef {
  id: string;
  kind: string;
  status: PlanningSessionStatus;
  planId: string | null;
  traceId: string;
}

interface RefRow {
  id: string;
  kind: string;
  status: PlanningSessionStatus;
  plan_id: string | null;
  trace_id: string;
}

const RETURNING = "returning s.id, s.kind, s.status, s.plan_id, s.trace_id";
const toRef = (row: RefRow): SessionRef => ({
  id: row.id,
  kind: row.kind,
  status: row.status,
  planId: row.plan_id,
  traceId: row.trace_id,
});

/**
 * One status change: the update moves the row only from an allowed status (and only when the
 * caller's extra condition holds); otherwise nothing changes and the refusal says why.
 * `set` and `where` use parameters from $4 on (`params`).
 */
async function transition(
  client: Client,
  name: TransitionName,
  sessionId: string,
  change: { set?: string; where?: string; params?: unknown[]; refusal?: string } = {},
): Promise<SessionRef> {
  const rule = TRANSITIONS[name];
  const moved = await client.query<RefRow>(
    `update planning_sessions s set status = $2${change.set ? `, ${change.set}` : ""}
     where s.id = $1 and s.status = any($3::text[])${change.where ? ` and (${change.where})` : ""}
     ${RETURNING}`,
    [sessionId, rule.to, rule.from, ...(change.params ?? [])],
  );
  const row = moved.rows[0];
  if (row) return toRef(row);
  const current = await client.query<{ status: PlanningSessionStatus }>(
    "select status from planning_sessions where id = $1",
    [sessionId],
  );
  const status = current.rows[0]?.status;
  if (!status) throw new AppError("not_found", `No planning session ${sessionId}`);
  const details: RefusedTransition = { sessionId, transition: name, status, allowed: rule.from };
  const allowed = (rule.from as readonly PlanningSessionStatus[]).includes(status);
  throw new AppError(
    "invalid_state",
    allowed && change.refusal
      ? change.refusal
      : `This planning session is ${STATUS_WORDS[status]}; it cannot ${name.replace(/[A-Z]/g, (c) => ` ${c.toLowerCase()}`)} from there (only when ${rule.from.map((from) => STATUS_WORDS[from]).join(" or ")})`,
    details,
  );
}

/** Everything that leaves `running` lets go of the loop's lease; every end is stamped by the database's clock. */
const END = "phase = 'done', worker_id = null, finished_at = now()";

// ---- Creation ----------------------------------------------------------------------------------

export interface NewSession {
  kind: "create" | "regenerate";
  mode: string;
  goal: string;
  model: string;
  workspaceId: string | null;
  workspaceRoot: string;
  useJudge: boolean;
  maxRefinements: number;
  planId?: string | null;
  baseVersion?: number | null;
  feedback?: string | null;
  traceId: string;
  actor: string;
}

/** A built-in planner's session, running and queued (its job is queued by the caller, in the same transaction). */
export async function createSession(client: Client, input: NewSession): Promise<{ id: string }> {
  const rows = await client.query<{ id: string }>(
    `insert into planning_sessions (id, kind, mode, status, phase, goal, model, workspace_id, workspace_root,
       use_judge, max_refinements, plan_id, base_version, feedback, trace_id, actor)
     values (gen_random_uuid(), $1, $2, 'running', 'queued', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
     returning id`,
    [
      input.kind,
      input.mode,
      input.goal,
      input.model,
      input.workspaceId,
      input.workspaceRoot,
      input.useJudge,
      input.maxRefinements,
      input.planId ?? null,
      input.baseVersion ?? null,
      input.feedback ?? null,
      input.traceId,
      input.actor,
    ],
  );
  return { id: rows.rows[0]!.id };
}

/** An agent's plan-mode session: running, driven by the agent (no loop, no lease). */
export async function createExternalSession(
  client: Client,
  input: {
    id: string;
    reason: string;
    model: string;
    workspaceRoot: string;
    traceId: string;
    actor: string;
    /** The named credential that proved the agent (null: the shared agent token). */
    actorCredential?: string | null;
  },
): Promise<void> {
  await client.query(
    `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor, actor_credential)
     values ($1, 'external', 'deep', 'running', $2, $3, $4, $5, $6, $7)`,
    [
      input.id,
      input.reason,
      input.model,
      input.workspaceRoot,
      input.traceId,
      input.actor,
      input.actorCredential ?? null,
    ],
  );
}

// ---- The loop's lease and progress (built-in planner) -----------------------------------------

/** SQL: the worker named in `s.worker_id` has beaten recently (as leases.ts judges step owners). */
export const OWNER_ALIVE = `exists (select 1 from workers w where w.id = s.worker_id and w.stopped_at is null
  and w.last_seen > now() - make_interval(secs => w.heartbeat_ms * 5 / 1000.0))`;

/**
 * Takes the session's loop for this worker: it must be running and not held by another live
 * worker. The worker's own id it takes back (a loop of its that ended without letting go); that
 * the same process never runs one session twice at once is the caller's check (session-jobs.ts).
 */
export async function claimLoop(client: Client, sessionId: string, workerId: string): Promise<boolean> {
  const claimed = await client.query(
    `update planning_sessions s set worker_id = $2
     where s.id = $1 and s.status = 'running' and s.kind <> 'external'
       and (s.worker_id is null or s.worker_id = $2 or not ${OWNER_ALIVE})`,
    [sessionId, workerId],
  );
  return (claimed.rowCount ?? 0) > 0;
}

/** The worker lets go of a running session it holds (shutting down); false when it no longer held it. */
export async function releaseLoop(client: Client, sessionId: string, workerId: string): Promise<boolean> {
  const released = await client.query(
    "update planning_sessions set worker_id = null where id = $1 and worker_id = $2 and status = 'running'",
    [sessionId, workerId],
  );
  return (released.rowCount ?? 0) > 0;
}

/** Frees a running session whose holder stopped beating (or that nobody holds); false when it is held after all. */
export async function releaseOrphan(client: Client, sessionId: string): Promise<boolean> {
  const released = await client.query(
    `update planning_sessions s set worker_id = null
     where s.id = $1 and s.status = 'running' and (s.worker_id is null or not ${OWNER_ALIVE})`,
    [sessionId],
  );
  return (released.rowCount ?? 0) > 0;
}

/** Moves the loop's phase; false when the worker no longer holds a running session (cancelled, or taken over). */
export async function setPhase(client: Client, sessionId: string, workerId: string, phase: string): Promise<boolean> {
  const moved = await client.query(
    "update planning_sessions set phase = $3 where id = $1 and worker_id = $2 and status = 'running'",
    [sessionId, workerId, phase],
  );
  return (moved.rowCount ?? 0) > 0;
}

/** Saves deep mode's transcript (and the phase with it), under the same condition as `setPhase`. */
export async function saveLoopState(
  client: Client,
  sessionId: string,
  workerId: string,
  state: unknown,
  phase?: string,
): Promise<boolean> {
  const saved = await client.query(
    `update planning_sessions set loop_state = $3::jsonb, phase = coalesce($4, phase)
     where id = $1 and worker_id = $2 and status = 'running'`,
    [sessionId, workerId, JSON.stringify(state), phase ?? null],
  );
  return (saved.rowCount ?? 0) > 0;
}

/** The last draft the model produced, gates passed or not (shown when the session ends invalid). */
export async function saveDraft(client: Client, sessionId: string, draft: unknown): Promise<void> {
  await client.query("update planning_sessions set draft = $2::jsonb where id = $1", [
    sessionId,
    JSON.stringify(draft),
  ]);
}

/**
 * The plan a loop saved when the session had ended meanwhile (cancelled while saving): the plan
 * exists, so the session links to it; its status stays.
 */
export async function linkPlan(client: Client, sessionId: string, planId: string): Promise<void> {
  await client.query("update planning_sessions set plan_id = $2 where id = $1", [sessionId, planId]);
}

/** An agent's call in plan mode while it gathers; false when the session is not gathering. */
export async function touchActivity(client: Client, sessionId: string): Promise<boolean> {
  const touched = await client.query(
    "update planning_sessions set last_activity_at = now() where id = $1 and kind = 'external' and status = 'running'",
    [sessionId],
  );
  return (touched.rowCount ?? 0) > 0;
}

// ---- Status transitions --------------------------------------------------------------------------

/**
 * The session parks on a question. The built-in loop parks only while its worker holds it (and
 * lets go of it: waiting holds no job); an agent's session parks whenever it gathers, or revises.
 */
export function askQuestion(client: Client, sessionId: string, holder?: { workerId: string }): Promise<SessionRef> {
  return transition(client, "askQuestion", sessionId, {
    set: "worker_id = null",
    ...(holder
      ? {
          where: "s.status = 'running' and s.worker_id = $4",
          params: [holder.workerId],
          refusal: "This planning session is held by another worker",
        }
      : {
          where: "s.status = 'running' or s.kind = 'external'",
          refusal: "Only an agent's session asks again after its plan was submitted",
        }),
  });
}

/**
 * A question was answered. The session goes back to running once no question waits for its
 * answer: "resumed"; "waiting" while another question is still open.
 */
export async function recordAnswer(client: Client, sessionId: string): Promise<"resumed" | "waiting"> {
  try {
    await transition(client, "recordAnswer", sessionId, {
      where: "not exists (select 1 from planning_questions q where q.session_id = s.id and q.answer is null)",
      refusal: "Another question still waits for its answer",
    });
    return "resumed";
  } catch (error) {
    if (lostRace(error) && error.details.status === "awaiting_answer") return "waiting";
    throw error;
  }
}

/** The built-in planner's plan is saved: the session ends with it. */
export function complete(
  client: Client,
  sessionId: string,
  result: { planId: string; resultVersion: number },
): Promise<SessionRef> {
  return transition(client, "complete", sessionId, {
    set: `${END}, plan_id = $4, result_version = $5::int`,
    params: [result.planId, result.resultVersion],
  });
}

/** An agent's plan (or its next version) goes to the person's review. */
export function submitPlan(
  client: Client,
  sessionId: string,
  result: { planId: string; resultVersion: number },
): Promise<SessionRef> {
  return transition(client, "submitPlan", sessionId, {
    set: `${END}, plan_id = $4, result_version = $5::int`,
    where: "s.kind = 'external'",
    params: [result.planId, result.resultVersion],
    refusal: "Only an agent's plan-mode session submits a plan",
  });
}

export function markInvalid(client: Client, sessionId: string, failure: object): Promise<SessionRef> {
  return transition(client, "markInvalid", sessionId, {
    set: `${END}, failure = $4::jsonb`,
    params: [JSON.stringify(failure)],
  });
}

export function fail(client: Client, sessionId: string, failure: object): Promise<SessionRef> {
  return transition(client, "fail", sessionId, {
    set: `${END}, failure = $4::jsonb`,
    params: [JSON.stringify(failure)],
  });
}

export function cancel(client: Client, sessionId: string): Promise<SessionRef> {
  return transition(client, "cancel", sessionId, { set: END });
}

/** The question's timer fired: cancelled only if that question is still unanswered. */
export function timeOutQuestion(
  client: Client,
  sessionId: string,
  questionId: string,
  failure: object,
): Promise<SessionRef> {
  return transition(client, "timeOutQuestion", sessionId, {
    set: `${END}, failure = $5::jsonb`,
    where: "exists (select 1 from planning_questions q where q.id = $4 and q.session_id = s.id and q.answer is null)",
    params: [questionId, JSON.stringify(failure)],
    refusal: "That question was answered",
  });
}

/** The idle timer fired: cancelled only if the agent made no call since the limit began. */
export function timeOutIdle(
  client: Client,
  sessionId: string,
  timeoutMs: number,
  failure: object,
): Promise<SessionRef> {
  return transition(client, "timeOutIdle", sessionId, {
    set: `${END}, failure = $5::jsonb`,
    where: `s.kind = 'external'
      and coalesce(s.last_activity_at, s.created_at) <= now() - make_interval(secs => $4::double precision / 1000)`,
    params: [timeoutMs, JSON.stringify(failure)],
    refusal: "The agent made a call within the limit",
  });
}

/**
 * A person rejected the plan: every agent session planning it ends (the agent learns why from
 * plan.review_status). Set-wise: a plan has at most a few; those already ended stay as they are.
 */
export async function endForRejectedPlan(client: Client, planId: string): Promise<SessionRef[]> {
  const rule = TRANSITIONS.endForRejectedPlan;
  const ended = await client.query<RefRow>(
    `update planning_sessions s set status = $2, ${END}
     where s.plan_id = $1 and s.kind = 'external' and s.status = any($3::text[])
     ${RETURNING}`,
    [planId, rule.to, rule.from],
  );
  return ended.rows.map(toRef);
}

/** Why the review ended: nobody reviewed in time (the session was ended by that rejection). */
export function recordReviewTimeout(client: Client, sessionId: string, failure: object): Promise<SessionRef> {
  return transition(client, "recordReviewTimeout", sessionId, {
    set: "failure = $4::jsonb, phase = 'done', finished_at = coalesce(s.finished_at, now())",
    params: [JSON.stringify(failure)],
  });
}

/** The agent left plan mode while its plan waits for review: its tools are its own again. */
export async function markPlanModeLeft(client: Client, sessionId: string): Promise<void> {
  await client.query(
    "update planning_sessions set plan_mode_left_at = coalesce(plan_mode_left_at, now()) where id = $1",
    [sessionId],
  );
}

/**
 * An agent's resubmission after the person sent the plan back: it is planning again, so plan
 * mode holds again until the next decision.
 */
export async function markPlanModeHeld(client: Client, sessionId: string): Promise<void> {
  await client.query("update planning_sessions set plan_mode_left_at = null where id = $1", [sessionId]);
}
