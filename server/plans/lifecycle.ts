import type pg from "pg";
import { recordAudit } from "../audit/audit-log";
import { inTransaction, type Statement } from "../db";
import { AppError } from "../errors";
import { ACTIVE_RUN_STATUSES, type PlanLifecycleState } from "../vocabulary";

/**
 * A plan's life beyond its versions (seed 002's Plan Approval, and discarding plans): a person may
 * reject a submitted plan (it ends; its planning session shows "rejected"), archive a plan (hidden
 * from the plans list) and restore either. A rejected or archived plan never starts a run:
 * `startRun` reads the same columns under the plan row lock (`assertPlanMayRun`), and these
 * changes take that lock first, so an approval and a rejection of one plan never both succeed.
 */
export type { PlanLifecycleState } from "../vocabulary";

export interface PlanRow {
  id: string;
  current_version: number;
  rejected_at: Date | null;
  rejected_version: number | null;
  archived_at: Date | null;
}

/** Locks the plan row for a lifecycle change in `client`'s transaction. */
export async function lockPlan(client: pg.PoolClient, planId: string): Promise<PlanRow> {
  const rows = await client.query<PlanRow>(
    "select id, current_version, rejected_at, rejected_version, archived_at from plans where id = $1 for update",
    [planId],
  );
  const plan = rows.rows[0];
  if (!plan) throw new AppError("not_found", `No plan ${planId}`);
  return plan;
}

/** `assertPlanMayRun`'s read, for a caller that sends it with `begin` (`inTransaction`'s `openWith`). */
export function planMayRunRead(planId: string): Statement {
  return { text: "select rejected_at, archived_at from plans where id = $1 for share", values: [planId] };
}

/**
 * The one rule every run start checks (inside its transaction, before inserting the run), on the
 * result of `planMayRunRead`, run in that transaction.
 */
export function assertPlanMayRun(read: pg.QueryResult): void {
  const plan = (read as pg.QueryResult<{ rejected_at: Date | null; archived_at: Date | null }>).rows[0];
  if (plan?.rejected_at) {
    throw new AppError("invalid_state", "This plan was rejected and cannot run; restore it first to approve it");
  }
  if (plan?.archived_at) {
    throw new AppError("invalid_state", "This plan is archived and cannot run; restore it first to approve it");
  }
}

/** Archives (discards) a plan; refused while one of its runs is still going. */
export async function archivePlan(
  pool: pg.Pool,
  input: { planId: string; actor: string },
): Promise<{ planId: string; state: PlanLifecycleState }> {
  return inTransaction(pool, async (client) => {
    const plan = await lockPlan(client, input.planId);
    if (plan.archived_at) throw new AppError("invalid_state", "This plan is already archived");
    const active = await client.query<{ id: string; status: string }>(
      "select id, status from runs where plan_id = $1 and status = any($2::text[]) order by created_at limit 1",
      [input.planId, ACTIVE_RUN_STATUSES],
    );
    const run = active.rows[0];
    if (run) {
      throw new AppError(
        "invalid_state",
        `A run of this plan is still ${run.status} (${run.id}); cancel it or let it finish before archiving the plan`,
        { runId: run.id },
      );
    }
    await client.query("update plans set archived_at = now() where id = $1", [input.planId]);
    await recordAudit(client, {
      actor: input.actor,
      action: "plan.archived",
      planId: input.planId,
      planVersion: plan.current_version,
      detail: {},
    });
    return { planId: input.planId, state: plan.rejected_at ? ("rejected" as const) : ("archived" as const) };
  });
}

/** Brings an archived or rejected plan back to the list; it may be approved again. */
export async function restorePlan(
  pool: pg.Pool,
  input: { planId: string; actor: string },
): Promise<{ planId: string; state: "active" }> {
  return inTransaction(pool, async (client) => {
    const plan = await lockPlan(client, input.planId);
    if (!plan.archived_at && !plan.rejected_at) {
      throw new AppError("invalid_state", "This plan is neither archived nor rejected; there is nothing to restore");
    }
    await client.query(
      "update plans set archived_at = null, rejected_at = null, rejected_version = null where id = $1",
      [input.planId],
    );
    await recordAudit(client, {
      actor: input.actor,
      action: "plan.restored",
      planId: input.planId,
      planVersion: plan.current_version,
      detail: { wasArchived: plan.archived_at !== null, wasRejectedVersion: plan.rejected_version },
    });
    return { planId: input.planId, state: "active" as const };
  });
}

export function lifecycleStateOf(plan: { rejectedAt: Date | null; archivedAt: Date | null }): PlanLifecycleState {
  if (plan.rejectedAt) return "rejected";
  if (plan.archivedAt) return "archived";
  return "active";
}
