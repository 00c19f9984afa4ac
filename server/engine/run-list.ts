import type pg from "pg";
import { z } from "zod";
import { AppError } from "../errors";
import { toStoredEvent, type EventRow } from "../events/store";
import { storedEventSchema } from "../events/event-schemas";
import type { StoredEvent } from "../events/types";
import type { StepStatus } from "../plan-schema";
import {
  decisionKindSchema,
  identityKindSchema,
  runStatusSchema,
  stepStatusSchema,
  type IdentityKind,
} from "../vocabulary";
import { RUN_STATUSES, type RunStatus } from "./state-machine";

/**
 * Read-only queries behind the runs lists and the live view's on-demand panels (stored log lines,
 * earlier events, decisions). `getRun` in run-view.ts stays the one snapshot of a single run.
 */

type Queryable = Pick<pg.ClientBase, "query">;

export const runListInputSchema = z.object({
  planId: z.string().max(100).optional(),
  statuses: z.array(z.enum(RUN_STATUSES)).max(RUN_STATUSES.length).optional(),
  limit: z.number().int().min(1).max(200).default(50),
  /** The `nextCursor` of the previous page. */
  cursor: z.string().max(200).nullish(),
});
export type RunListInput = z.input<typeof runListInputSchema>;

export const runSummarySchema = z.object({
  id: z.string(),
  planId: z.string(),
  planVersion: z.number(),
  goal: z.string(),
  status: runStatusSchema,
  approvedBy: z.string(),
  createdAt: z.string(),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  totalSteps: z.number(),
  stepCounts: z.partialRecord(stepStatusSchema, z.number()),
});
export type RunSummary = z.output<typeof runSummarySchema>;

export const runListPageSchema = z.object({
  runs: z.array(runSummarySchema),
  /** Pass back as `cursor` for the next (older) page; null when there is none. */
  nextCursor: z.string().nullable(),
  /** How many runs each state has under the same plan filter, ignoring the state filter. */
  statusCounts: z.partialRecord(runStatusSchema, z.number()),
});
export type RunListPage = z.output<typeof runListPageSchema>;

interface RunSummaryRow {
  id: string;
  plan_id: string;
  plan_version: number;
  goal: string;
  status: RunStatus;
  approved_by: string;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  step_counts: Partial<Record<StepStatus, number>> | null;
}

function decodeCursor(cursor: string): { createdAt: string; id: string } {
  const [createdAt, id] = cursor.split("|");
  if (!createdAt || !id || Number.isNaN(Date.parse(createdAt)) || !z.uuid().safeParse(id).success) {
    throw new AppError("invalid_input", "The runs list cursor is not one this server handed out");
  }
  return { createdAt, id };
}

/** Runs newest first, across the app or for one plan, optionally only in some states. */
export async function listRunSummaries(db: Queryable, input: RunListInput): Promise<RunListPage> {
  const { planId, statuses, limit, cursor } = runListInputSchema.parse(input);
  const after = cursor ? decodeCursor(cursor) : null;
  const rows = await db.query<RunSummaryRow>(
    `select r.id, r.plan_id, r.plan_version, r.status, r.approved_by, r.created_at, r.started_at, r.finished_at,
            pv.goal,
            (select jsonb_object_agg(c.status, c.n)
               from (select status, count(*)::int as n from run_steps where run_id = r.id group by status) c) as step_counts
     from runs r
     join plan_versions pv on pv.plan_id = r.plan_id and pv.version = r.plan_version
     where ($1::text is null or r.plan_id = $1)
       and ($2::text[] is null or r.status = any($2))
       and ($3::timestamptz is null or (r.created_at, r.id) < ($3::timestamptz, $4::uuid))
     order by r.created_at desc, r.id desc
     limit $5`,
    [planId ?? null, statuses?.length ? statuses : null, after?.createdAt ?? null, after?.id ?? null, limit + 1],
  );
  const counts = await db.query<{ status: RunStatus; n: number }>(
    `select status, count(*)::int as n from runs where ($1::text is null or plan_id = $1) group by status`,
    [planId ?? null],
  );
  const page = rows.rows.slice(0, limit);
  const last = page.at(-1);
  return {
    runs: page.map((row) => {
      const stepCounts = row.step_counts ?? {};
      return {
        id: row.id,
        planId: row.plan_id,
        planVersion: row.plan_version,
        goal: row.goal,
        status: row.status,
        approvedBy: row.approved_by,
        createdAt: row.created_at.toISOString(),
        startedAt: row.started_at?.toISOString() ?? null,
        finishedAt: row.finished_at?.toISOString() ?? null,
        totalSteps: Object.values(stepCounts).reduce((sum, n) => sum + (n ?? 0), 0),
        stepCounts,
      };
    }),
    nextCursor: rows.rows.length > limit && last ? `${last.created_at.toISOString()}|${last.id}` : null,
    statusCounts: Object.fromEntries(counts.rows.map((row) => [row.status, row.n])),
  };
}

export const runEventsInputSchema = z.object({
  runId: z.uuid(),
  /** Only events after this sequence number. */
  afterSeq: z.number().int().min(0).default(0),
  /** Only events up to this sequence number (the snapshot's, so live events are not read twice). */
  upToSeq: z.number().int().min(0).optional(),
  stepId: z.string().max(64).optional(),
  types: z.array(z.string().max(64)).max(20).optional(),
  limit: z.number().int().min(1).max(5000).default(1000),
});
export type RunEventsInput = z.input<typeof runEventsInputSchema>;

/** Stored events of a run, oldest first, filtered by step and type; page on with `afterSeq`. */
export async function readRunEvents(
  db: Queryable,
  input: RunEventsInput,
): Promise<{ events: StoredEvent[]; more: boolean }> {
  const { runId, afterSeq, upToSeq, stepId, types, limit } = runEventsInputSchema.parse(input);
  const exists = await db.query("select 1 from runs where id = $1", [runId]);
  if (exists.rowCount === 0) throw new AppError("not_found", `No run ${runId}`);
  const result = await db.query<EventRow>(
    `select * from events
     where stream_id = $1 and seq > $2 and ($3::int is null or seq <= $3)
       and ($4::text is null or step_id = $4) and ($5::text[] is null or type = any($5))
     order by seq limit $6`,
    [runId, afterSeq, upToSeq ?? null, stepId ?? null, types?.length ? types : null, limit + 1],
  );
  return {
    events: result.rows.slice(0, limit).map(toStoredEvent),
    more: result.rows.length > limit,
  };
}

export const runDecisionSchema = z.object({
  stepId: z.string(),
  planVersion: z.number(),
  decision: decisionKindSchema,
  actor: z.string(),
  /** person, agent or system; null for decisions recorded before kinds were stored. */
  actorKind: identityKindSchema.nullable(),
  comment: z.string().nullable(),
  createdAt: z.string(),
});
export type RunDecision = z.output<typeof runDecisionSchema>;

/** A page of a run's stored events; `more` when a later page has some. */
export const runEventsPageSchema = z.object({ events: z.array(storedEventSchema), more: z.boolean() });

/** Who approved or denied which gated step of a run, oldest first. */
export async function listRunDecisions(db: Queryable, runId: string): Promise<RunDecision[]> {
  const rows = await db.query<{
    step_id: string;
    plan_version: number;
    decision: "approved" | "denied";
    actor: string;
    actor_kind: IdentityKind | null;
    comment: string | null;
    created_at: Date;
  }>(
    "select step_id, plan_version, decision, actor, actor_kind, comment, created_at from approvals where run_id = $1 order by id",
    [runId],
  );
  return rows.rows.map((row) => ({
    stepId: row.step_id,
    planVersion: row.plan_version,
    decision: row.decision,
    actor: row.actor,
    actorKind: row.actor_kind,
    comment: row.comment,
    createdAt: row.created_at.toISOString(),
  }));
}
