import type pg from "pg";
import { OPEN_PLANNING_STATUSES } from "../vocabulary";

/**
 * Where a planned plan's review stands — the one answer the planning list, the inbox, the plan
 * operations (plan.review_status, the agent's plan_review_status) and the review timer all read,
 * so "waiting for you" in the planning list and a plan in the inbox are the same rule
 * (planning-inbox.int.test.ts checks the counts agree). `loadReviewFacts` reads what the rule
 * depends on; `reviewStateOf` decides, pure.
 */
export const REVIEW_STATES = [
  /** Waits for a person's decision. */
  "awaiting_review",
  /** A person approved it: a run of that version exists. */
  "approved",
  "rejected",
  /** Sent back with instructions; the agent (or a person) makes the next version. */
  "changes_requested",
  /** A later version replaced the one asked about. */
  "superseded",
  /** Archived (discarded) without a decision. */
  "archived",
  /** A planning session is still making the plan's next version: nothing to review yet. */
  "revising",
] as const;
export type ReviewState = (typeof REVIEW_STATES)[number];

type ReviewAction = "plan.rejected" | "plan.changes_requested" | "plan.restored";

/** What a plan version's review depends on (one row of `loadReviewFacts`). */
export interface PlanReviewFacts {
  planId: string;
  /** The version asked about (the current one unless a caller names another). */
  version: number;
  currentVersion: number;
  rejected: boolean;
  archived: boolean;
  /** The first run of `version`, if a person approved it. */
  run: { id: string; approvedBy: string } | null;
  /** The latest review of `version` short of approval (a restore undoes a rejection). */
  lastReview: { action: ReviewAction; actor: string; comment: string } | null;
  /** A planning session of the plan is still open (running or waiting for an answer). */
  revising: boolean;
  /** The newest completed planning session of the plan: the one whose plan this is to review. */
  reviewSessionId: string | null;
}

export interface ReviewView {
  state: ReviewState;
  runId?: string;
  approvedBy?: string;
  /** For rejected and changes_requested: who decided, and their words. */
  reviewedBy?: string;
  comment?: string;
}

/** Pure: the review state of the version the facts describe (unit-tested rule by rule). */
export function reviewStateOf(facts: PlanReviewFacts): ReviewView {
  if (facts.run) return { state: "approved", runId: facts.run.id, approvedBy: facts.run.approvedBy };
  const review = facts.lastReview;
  if (review?.action === "plan.rejected" || (facts.rejected && facts.version === facts.currentVersion)) {
    return { state: "rejected", ...(review && { reviewedBy: review.actor, comment: review.comment }) };
  }
  if (review?.action === "plan.changes_requested") {
    return { state: "changes_requested", reviewedBy: review.actor, comment: review.comment };
  }
  if (facts.version < facts.currentVersion) return { state: "superseded" };
  if (facts.archived) return { state: "archived" };
  if (facts.revising) return { state: "revising" };
  return { state: "awaiting_review" };
}

/** Whether the plan is one the person has to decide on now (an inbox item, "waiting for you"). */
export function awaitsPersonReview(facts: PlanReviewFacts): boolean {
  return facts.reviewSessionId !== null && reviewStateOf(facts).state === "awaiting_review";
}

interface FactsRow {
  plan_id: string;
  version: number;
  current_version: number;
  rejected: boolean;
  archived: boolean;
  run_id: string | null;
  approved_by: string | null;
  review_action: ReviewAction | null;
  review_actor: string | null;
  review_detail: { comment?: unknown; reason?: unknown } | null;
  revising: boolean;
  review_session_id: string | null;
}

/**
 * The review facts of each plan asked about, at the version named (the current one when none is),
 * in one query. Plans that do not exist are absent from the map.
 */
export async function loadReviewFacts(
  client: Pick<pg.ClientBase, "query">,
  targets: readonly { planId: string; version?: number | null }[],
): Promise<Map<string, PlanReviewFacts>> {
  if (targets.length === 0) return new Map();
  const rows = await client.query<FactsRow>(
    `select p.id as plan_id, v.version, p.current_version,
            p.rejected_at is not null as rejected, p.archived_at is not null as archived,
            run.id as run_id, run.approved_by,
            review.action as review_action, review.actor as review_actor, review.detail as review_detail,
            exists (select 1 from planning_sessions s
                     where s.plan_id = p.id and s.status = any($3)) as revising,
            (select s.id from planning_sessions s where s.plan_id = p.id and s.status = 'completed'
              order by s.created_at desc, s.id limit 1) as review_session_id
       from unnest($1::text[], $2::int[]) as t(plan_id, version)
       join plans p on p.id = t.plan_id
       cross join lateral (select coalesce(t.version, p.current_version) as version) v
       left join lateral (
         select r.id, r.approved_by from runs r
          where r.plan_id = p.id and r.plan_version = v.version order by r.created_at limit 1
       ) run on true
       left join lateral (
         select a.action, a.actor, a.detail from audit_entries a
          where a.plan_id = p.id and a.plan_version = v.version
            and a.action in ('plan.rejected', 'plan.changes_requested', 'plan.restored')
          order by a.id desc limit 1
       ) review on true`,
    [targets.map((target) => target.planId), targets.map((target) => target.version ?? null), OPEN_PLANNING_STATUSES],
  );
  const facts = new Map<string, PlanReviewFacts>();
  for (const row of rows.rows) {
    facts.set(row.plan_id, {
      planId: row.plan_id,
      version: row.version,
      currentVersion: row.current_version,
      rejected: row.rejected,
      archived: row.archived,
      run: row.run_id ? { id: row.run_id, approvedBy: row.approved_by ?? "" } : null,
      // A restore reopens the review: it counts as no review at all.
      lastReview:
        row.review_action && row.review_action !== "plan.restored"
          ? {
              action: row.review_action,
              actor: row.review_actor ?? "",
              comment: String(row.review_detail?.reason ?? row.review_detail?.comment ?? ""),
            }
          : null,
      revising: row.revising,
      reviewSessionId: row.review_session_id,
    });
  }
  return facts;
}
