import type pg from "pg";
import type { AuditAction } from "../audit/actions";
import { recordAudit } from "../audit/audit-log";
import { OPEN_PLANNING_STATUSES, type PlanningSessionStatus } from "../vocabulary";

/**
 * What a planning session's transitions (sessions.ts) and its conversation (messages.ts) share:
 * which statuses are open, how long a person's feedback may be, and how an entry about a session
 * is audited. In a file of its own so that neither of the two imports the other for it.
 */

export const MAX_GOAL_CHARS = 4_000;
export const MAX_FEEDBACK_CHARS = 4_000;

export type PlanningMode = "quick" | "deep";
export type SessionStatus = PlanningSessionStatus;
export const OPEN_STATUSES: SessionStatus[] = [...OPEN_PLANNING_STATUSES];

/** An audit entry about a session: under its plan when it has one, else under the session's id. */
export async function auditSession(
  client: Pick<pg.ClientBase, "query">,
  session: { id: string; planId: string | null },
  entry: { actor: string; action: AuditAction; detail?: Record<string, unknown> },
): Promise<void> {
  await recordAudit(client, {
    actor: entry.actor,
    action: entry.action,
    planId: session.planId ?? session.id,
    detail: { sessionId: session.id, ...entry.detail },
  });
}
