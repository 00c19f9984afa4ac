import type pg from "pg";
import { z } from "zod";
import { loadReviewFacts, reviewStateOf, type PlanReviewFacts } from "./review-state";

/**
 * The Planning list (seed 002): every planning session — the built-in planner's quick and deep
 * sessions and external agents' plan-mode sessions — with its state in words and what it waits
 * for. The state is derived from the session's status and what became of its plan — the plan's
 * review state, `reviewStateOf` (review-state.ts), the same rule the inbox lists plans by — so
 * nothing is stored twice and the list's "waiting for you" is the inbox's planning items.
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
  id: string;
  status: string;
  kind: string;
  planId: string | null;
  /** The session's first unanswered question. */
  openQuestion: string | null;
  /** The review facts of its plan's current version (null without a plan, or when the plan is gone). */
  review: PlanReviewFacts | null;
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
      return { state: facts.review?.rejected ? "rejected" : "cancelled", waitsFor: null, waitsOn: null };
    case "completed":
      break;
    default:
      return { state: "failed", waitsFor: null, waitsOn: null };
  }
  if (!facts.review) return { state: "cancelled", waitsFor: null, waitsOn: null };
  const review = reviewStateOf(facts.review);
  const plan = `plan ${facts.review.planId} v${facts.review.currentVersion}`;
  switch (review.state) {
    case "approved":
      return { state: "approved", waitsFor: null, waitsOn: null };
    case "rejected":
      return { state: "rejected", waitsFor: null, waitsOn: null };
    case "archived":
      return { state: "cancelled", waitsFor: null, waitsOn: null };
    case "changes_requested":
      // An agent revises by the instructions; a planner's plan waits for a person to regenerate or edit it.
      return facts.kind === "external"
        ? { state: "gathering", waitsFor: "the agent's revision of the plan", waitsOn: "agent" }
        : { state: "submitted", waitsFor: `a new version of ${plan} (changes were requested)`, waitsOn: null };
    case "revising":
      return { state: "submitted", waitsFor: `the next version of ${plan}, being planned`, waitsOn: planner };
    case "superseded":
    case "awaiting_review":
      // A plan is reviewed once: under the newest session that completed it.
      return facts.review.reviewSessionId === facts.id
        ? { state: "submitted", waitsFor: `your review of ${plan}`, waitsOn: "you" }
        : { state: "submitted", waitsFor: `the review of ${plan}, under a later planning session`, waitsOn: null };
  }
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
  /** Unanswered questions of a session waiting for you (each is an inbox item). */
  openQuestions: number;
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
  question_id: string | null;
  question: string | null;
  open_questions: number;
  run_id: string | null;
}

/** How many sessions the list reads before filtering by state: the newest ones. */
const SCAN_LIMIT = 500;

async function readSessions(pool: pg.Pool, where: string, params: unknown[], limit: number): Promise<Row[]> {
  const rows = await pool.query<Row>(
    `select s.id, s.kind, s.mode, s.status, s.goal, s.model, s.actor, s.plan_id, s.result_version,
            s.created_at, s.finished_at, p.current_version, pv.goal as plan_goal, pv.summary as plan_summary,
            q.id as question_id, q.question,
            (select count(*)::int from planning_questions oq
              where oq.session_id = s.id and oq.answer is null) as open_questions,
            (select r.id from runs r
              where r.plan_id = s.plan_id and r.plan_version >= coalesce(s.result_version, 1)
              order by r.created_at limit 1) as run_id
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

function toItem(row: Row, reviews: Map<string, PlanReviewFacts>): PlanningListItem {
  const view = derivePlanningState({
    id: row.id,
    status: row.status,
    kind: row.kind,
    planId: row.plan_id,
    openQuestion: row.question,
    review: row.plan_id ? (reviews.get(row.plan_id) ?? null) : null,
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
    openQuestions: row.open_questions,
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
  const items = await toItems(pool, await readSessions(pool, "", [], SCAN_LIMIT));
  const counts = Object.fromEntries(PLANNING_STATES.map((state) => [state, 0])) as Record<PlanningState, number>;
  for (const item of items) counts[item.state]++;
  // Each unanswered question and each plan to review is one inbox item.
  const waitingForYou = items.reduce(
    (total, item) => total + (item.waitsOn !== "you" ? 0 : item.state === "waiting" ? item.openQuestions : 1),
    0,
  );
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
  return (await toItems(pool, rows))[0] ?? null;
}

/** The rows with their states: the review facts of all their plans read in one query. */
async function toItems(pool: pg.Pool, rows: Row[]): Promise<PlanningListItem[]> {
  const planIds = [...new Set(rows.flatMap((row) => (row.plan_id ? [row.plan_id] : [])))];
  const reviews = await loadReviewFacts(
    pool,
    planIds.map((planId) => ({ planId })),
  );
  return rows.map((row) => toItem(row, reviews));
}
