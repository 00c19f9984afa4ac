import type pg from "pg";
import { z } from "zod";

/**
 * The Planning list (seed 002): every planning session — the built-in planner's quick and deep
 * sessions and external agents' plan-mode sessions — with its state in words and what it waits
 * for. The state is derived from the session's status and what became of its plan (a run, a
 * rejection, an archive, a request for changes), so nothing is stored twice.
 */
export const PLANNING_STATES = [
  "gathering",
  "waiting",
  "submitted",
  "approved",
  "rejected",
  "cancelled",
  "failed",
] as const;
export type PlanningState = (typeof PLANNING_STATES)[number];

export const planningListInputSchema = z
  .object({
    state: z.enum(PLANNING_STATES).optional(),
    /** Only sessions whose next move is the person's: questions and plans to review (the inbox's count). */
    waitsOn: z.literal("you").optional(),
    limit: z.number().int().min(1).max(200).default(100),
  })
  .default({ limit: 100 });

/** One session's columns and the facts about its plan the state depends on. */
export interface SessionFacts {
  status: string;
  kind: string;
  planId: string | null;
  resultVersion: number | null;
  planCurrentVersion: number | null;
  planRejected: boolean;
  planArchived: boolean;
  /** A run of the session's plan at the version it produced or a later one. */
  runId: string | null;
  openQuestion: string | null;
  /** The latest review of the produced version short of approval (external plans). */
  lastReview: string | null;
}

export interface PlanningStateView {
  state: PlanningState;
  /** What the session waits for, in words; null when it waits for nothing. */
  waitsFor: string | null;
  /** Who has to act next: the person, the planner (model or agent), or nobody. */
  waitsOn: "you" | "planner" | "agent" | null;
}

/** Pure: the session's state in words (unit-tested against every status). */
export function derivePlanningState(facts: SessionFacts): PlanningStateView {
  const planner = facts.kind === "external" ? ("agent" as const) : ("planner" as const);
  const who = facts.kind === "external" ? "the agent" : "the planner";
  switch (facts.status) {
    case "running":
      return { state: "gathering", waitsFor: `${who} (gathering context and drafting the plan)`, waitsOn: planner };
    case "awaiting_answer":
      // Answered, and the planner has not picked the answer up yet: it is the planner's turn.
      if (!facts.openQuestion) {
        return { state: "gathering", waitsFor: `${who} (reading your answer)`, waitsOn: planner };
      }
      return {
        state: "waiting",
        waitsFor: facts.openQuestion ? `your answer: “${facts.openQuestion}”` : "your answer",
        waitsOn: "you",
      };
    case "failed":
    case "invalid":
      return { state: "failed", waitsFor: null, waitsOn: null };
    case "cancelled":
      return { state: facts.planRejected ? "rejected" : "cancelled", waitsFor: null, waitsOn: null };
    case "completed":
      break;
    default:
      return { state: "failed", waitsFor: null, waitsOn: null };
  }
  if (facts.runId) return { state: "approved", waitsFor: null, waitsOn: null };
  if (facts.planRejected) return { state: "rejected", waitsFor: null, waitsOn: null };
  if (facts.planArchived || !facts.planId) return { state: "cancelled", waitsFor: null, waitsOn: null };
  if (facts.kind === "external" && facts.lastReview === "plan.changes_requested") {
    return { state: "gathering", waitsFor: "the agent's revision of the plan", waitsOn: "agent" };
  }
  const version = facts.planCurrentVersion ?? facts.resultVersion;
  return { state: "submitted", waitsFor: `your review of plan ${facts.planId} v${version}`, waitsOn: "you" };
}

export interface PlanningListItem extends PlanningStateView {
  id: string;
  kind: string;
  mode: string;
  status: string;
  /** What the session is about: the submitted plan's goal when there is one, else what it was started with. */
  goal: string;
  /** An agent's plan-mode session starts from its reason for planning; shown beside the plan's goal. */
  reason: string | null;
  model: string;
  actor: string;
  planId: string | null;
  resultVersion: number | null;
  planVersion: number | null;
  runId: string | null;
  questionId: string | null;
  createdAt: string;
  finishedAt: string | null;
}

interface Row {
  id: string;
  kind: string;
  mode: string;
  status: string;
  goal: string;
  model: string;
  actor: string;
  plan_id: string | null;
  result_version: number | null;
  created_at: Date;
  finished_at: Date | null;
  current_version: number | null;
  plan_goal: string | null;
  plan_summary: string | null;
  rejected_at: Date | null;
  archived_at: Date | null;
  question_id: string | null;
  question: string | null;
  run_id: string | null;
  last_review: string | null;
}

/** How many sessions the list reads before filtering by state: the newest ones. */
const SCAN_LIMIT = 500;

async function readSessions(pool: pg.Pool, where: string, params: unknown[], limit: number): Promise<Row[]> {
  const rows = await pool.query<Row>(
    `select s.id, s.kind, s.mode, s.status, s.goal, s.model, s.actor, s.plan_id, s.result_version,
            s.created_at, s.finished_at, p.current_version, pv.goal as plan_goal, pv.summary as plan_summary, p.rejected_at, p.archived_at,
            q.id as question_id, q.question,
            (select r.id from runs r
              where r.plan_id = s.plan_id and r.plan_version >= coalesce(s.result_version, 1)
              order by r.created_at limit 1) as run_id,
            (select a.action from audit_entries a
              where a.plan_id = s.plan_id and a.plan_version = p.current_version
                and a.action in ('plan.changes_requested', 'plan.rejected', 'plan.restored')
              order by a.id desc limit 1) as last_review
       from planning_sessions s
       left join plans p on p.id = s.plan_id
       left join plan_versions pv on pv.plan_id = p.id and pv.version = p.current_version
       left join lateral (
         select id, question from planning_questions
          where session_id = s.id and answer is null order by asked_at limit 1
       ) q on true
      ${where}
      order by s.created_at desc, s.id
      limit ${limit}`,
    params,
  );
  return rows.rows;
}

function toItem(row: Row): PlanningListItem {
  const view = derivePlanningState({
    status: row.status,
    kind: row.kind,
    planId: row.plan_id,
    resultVersion: row.result_version,
    planCurrentVersion: row.current_version,
    planRejected: row.rejected_at !== null,
    planArchived: row.archived_at !== null,
    runId: row.run_id,
    openQuestion: row.question,
    lastReview: row.last_review,
  });
  return {
    ...view,
    id: row.id,
    kind: row.kind,
    mode: row.mode,
    status: row.status,
    // An agent's plan is stored under its reason for planning; what the plan does is its summary.
    goal: row.kind === "external" ? (row.plan_summary ?? row.goal) : (row.plan_goal ?? row.goal),
    reason: row.kind === "external" ? row.goal : null,
    model: row.model,
    actor: row.actor,
    planId: row.plan_id,
    resultVersion: row.result_version,
    planVersion: row.current_version,
    runId: row.run_id,
    questionId: row.question_id,
    createdAt: row.created_at.toISOString(),
    finishedAt: row.finished_at?.toISOString() ?? null,
  };
}

/**
 * Newest first; `state` and `waitsOn` filter; `counts` are per state over the sessions read, and
 * `waitingForYou` counts what the person has to act on — the same sessions the inbox lists
 * (a question to answer or a submitted plan to review).
 */
export async function listPlanningSessionStates(
  pool: pg.Pool,
  input: z.output<typeof planningListInputSchema>,
): Promise<{ sessions: PlanningListItem[]; counts: Record<PlanningState, number>; waitingForYou: number }> {
  const items = (await readSessions(pool, "", [], SCAN_LIMIT)).map(toItem);
  const counts = Object.fromEntries(PLANNING_STATES.map((state) => [state, 0])) as Record<PlanningState, number>;
  for (const item of items) counts[item.state]++;
  const waitingForYou = items.filter((item) => item.waitsOn === "you").length;
  const sessions = items
    .filter(
      (item) => (!input.state || item.state === input.state) && (!input.waitsOn || item.waitsOn === input.waitsOn),
    )
    .slice(0, input.limit);
  return { sessions, counts, waitingForYou };
}

/** One session's derived state (the session page's Reject and Edit read it). */
export async function getPlanningSessionState(pool: pg.Pool, sessionId: string): Promise<PlanningListItem | null> {
  const rows = await readSessions(pool, "where s.id = $1", [sessionId], 1);
  return rows[0] ? toItem(rows[0]) : null;
}
