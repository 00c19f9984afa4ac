import type pg from "pg";
import { z } from "zod";
import type { AuditAction } from "./actions";
import { actorKindOf } from "../caller-context";
import type { IdentityKind } from "../vocabulary";
import { canonicalContent, type AuditContent } from "./chain";

type Queryable = Pick<pg.ClientBase, "query">;

/**
 * The audit log: who decided what, when, on which plan version, run and step. Every decision
 * (approvals, denials, cancellations, waived gates, recovery decisions, answers) is written by
 * `recordAudit` in the same transaction as the change it records, so the log never claims a
 * decision that did not happen or misses one that did.
 */
export interface AuditRecord {
  /** The authenticated identity's name (`system` for the engine's own decisions). */
  actor: string;
  /** person, agent or system; by default the kind of the identity whose call writes this entry. */
  actorKind?: IdentityKind;
  /** Dotted verb, e.g. `step.approved`, `run.cancelled`, `gate.waived`, `recovery.accepted`. */
  action: AuditAction;
  planId: string;
  planVersion?: number | null;
  runId?: string | null;
  stepId?: string | null;
  detail?: Record<string, unknown>;
}

/**
 * Appends one entry to the audit chain (server/audit/chain.ts) in ONE statement: it bumps the
 * chain head — whose row lock the caller's transaction then holds until it ends, so concurrent
 * appenders queue from "read head" to "write entry" and can never both chain onto the same
 * predecessor — and inserts the entry with the next seq, the head's hash as `prev_hash`, and its
 * own hash computed by PostgreSQL from exactly the values stored (the time included: the append's
 * clock, never before the head's, so time and seq agree). Being one statement it is atomic on a
 * pool too. Inside a transaction, append after the rows the transaction locks: the head's lock is
 * then the last one taken, and no two transactions wait on each other through it.
 */
export async function recordAudit(db: Queryable, entry: AuditRecord): Promise<void> {
  const content: AuditContent = {
    actor: entry.actor,
    actorKind: entry.actorKind ?? actorKindOf(entry.actor),
    action: entry.action,
    planId: entry.planId,
    planVersion: entry.planVersion ?? null,
    // Stored as a uuid, which PostgreSQL writes back lower-case: hash what comes back.
    runId: entry.runId?.toLowerCase() ?? null,
    stepId: entry.stepId ?? null,
    detail: entry.detail ?? {},
  };
  await db.query(APPEND_ENTRY, [canonicalContent(content)]);
}

/**
 * $1 is the entry's canonical JSON: the columns are read from it, so what is stored is what was
 * hashed. The hash is `chainHash` of chain.ts, spelt in SQL.
 */
const APPEND_ENTRY = `
  with append_time as (select date_trunc('milliseconds', clock_timestamp()) as at),
  head as (
    update audit_chain_head h
       set seq = h.seq + 1,
           prev_hash = h.row_hash,
           created_at = greatest(t.at, h.created_at),
           row_hash = encode(sha256(convert_to(
             h.row_hash || E'\\n' || $1::text || E'\\n' || (h.seq + 1)::text || E'\\n' ||
             to_char(greatest(t.at, h.created_at) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'),
             'UTF8')), 'hex')
      from append_time t
     where h.id = 1
     returning h.seq, h.prev_hash, h.row_hash, h.created_at
  ),
  content as (select $1::text::jsonb as c)
  insert into audit_entries
    (actor, actor_kind, action, plan_id, plan_version, run_id, step_id, detail, seq, prev_hash, row_hash, created_at)
  select c->>'actor', c->>'actorKind', c->>'action', c->>'planId', (c->>'planVersion')::int,
         (c->>'runId')::uuid, c->>'stepId', c->'detail', head.seq, head.prev_hash, head.row_hash, head.created_at
    from head, content`;

export const auditListInputSchema = z.object({
  planId: z.string().trim().min(1).max(100).optional(),
  runId: z.uuid().optional(),
  /** The person (or agent, or `system`) who decided: exact name. */
  actor: z.string().trim().min(1).max(200).optional(),
  /** The `nextCursor` of the previous page: entries older than it. */
  cursor: z
    .string()
    .regex(/^\d{1,19}$/, "A cursor is the nextCursor of an earlier page")
    .optional(),
  limit: z.number().int().min(1).max(200).default(50),
});
export type AuditListInput = z.input<typeof auditListInputSchema>;

export interface AuditEntryView {
  id: string;
  actor: string;
  /** person, agent or system; null for entries written before kinds were stored. */
  actorKind: IdentityKind | null;
  action: string;
  planId: string;
  /**
   * Set when the entry is about a planning session that never produced a plan (an answer, a
   * cancel): the session's page is where it lives, since there is no plan page to link to.
   */
  planningSessionId: string | null;
  planVersion: number | null;
  /** The goal of the plan version the decision was about, for reading the log without opening it. */
  planGoal: string | null;
  runId: string | null;
  stepId: string | null;
  detail: Record<string, unknown>;
  createdAt: string;
}

export interface AuditPage {
  entries: AuditEntryView[];
  /** Pass as `cursor` for the next, older page; null on the last page. */
  nextCursor: string | null;
}

/**
 * Entries newest first, filtered by plan, run and actor, a page at a time. Keyset paging on the
 * entry id (indexes `(plan_id, id)`, `(run_id, id)`, `(actor, id)`) costs the same on page 1000
 * as on page 1, where an offset would read every skipped row.
 */
export async function listAuditEntries(db: Queryable, rawInput: AuditListInput): Promise<AuditPage> {
  const input = auditListInputSchema.parse(rawInput);
  const where: string[] = [];
  const params: unknown[] = [];
  const add = (sql: string, value: unknown) => {
    params.push(value);
    where.push(sql.replace("?", `$${params.length}`));
  };
  if (input.planId) add("a.plan_id = ?", input.planId);
  if (input.runId) add("a.run_id = ?", input.runId);
  if (input.actor) add("a.actor = ?", input.actor);
  if (input.cursor) add("a.id < ?::bigint", input.cursor);
  params.push(input.limit + 1);
  const rows = await db.query<{
    id: string;
    actor: string;
    actor_kind: IdentityKind | null;
    action: string;
    plan_id: string;
    plan_version: number | null;
    goal: string | null;
    session_goal: string | null;
    plan_exists: boolean;
    run_id: string | null;
    step_id: string | null;
    detail: Record<string, unknown> | null;
    created_at: Date;
  }>(
    `select a.id::text, a.actor, a.actor_kind, a.action, a.plan_id, a.plan_version, pv.goal, a.run_id, a.step_id,
            a.detail, a.created_at, p.id is not null as plan_exists, ps.goal as session_goal
     from audit_entries a
     left join plan_versions pv on pv.plan_id = a.plan_id and pv.version = a.plan_version
     left join plans p on p.id = a.plan_id
     left join planning_sessions ps
       on p.id is null and a.detail ? 'sessionId' and ps.id::text = a.detail->>'sessionId' 
     ${where.length > 0 ? `where ${where.join(" and ")}` : ""}
     order by a.id desc
     limit $${params.length}`,
    params,
  );
  const page = rows.rows.slice(0, input.limit);
  return {
    entries: page.map((row) => ({
      id: row.id,
      actor: row.actor,
      actorKind: row.actor_kind,
      action: row.action,
      planId: row.plan_id,
      planningSessionId: !row.plan_exists && typeof row.detail?.sessionId === "string" ? row.detail.sessionId : null,
      planVersion: row.plan_version,
      planGoal: row.goal ?? row.session_goal,
      runId: row.run_id,
      stepId: row.step_id,
      detail: row.detail ?? {},
      createdAt: new Date(row.created_at).toISOString(),
    })),
    nextCursor: rows.rows.length > input.limit ? page[page.length - 1]!.id : null,
  };
}
