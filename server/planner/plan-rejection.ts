import type pg from "pg";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { lockPlan } from "../plans/lifecycle";
import { endForRejectedPlan } from "./session-store";
import { OPEN_PLANNING_STATUSES } from "../vocabulary";

/*
 * Rejecting a plan is a lifecycle change of the plan (server/plans/lifecycle.ts) that also ends the
 * planning sessions open on it, so it lives with the sessions, above the plans it changes.
 */

/**
 * Rejects the plan at `version` (its current one, never run). Ends every planning session still
 * open on it, writes `plan.rejected` with the reason. Both kinds of planning session agree: the
 * built-in planner's and an external agent's (which reads the rejection through plan.review_status).
 * `alongside` writes in the same transaction what the rejection's author records with it (the
 * review timer: why), so nobody reads the rejection without it.
 */
export async function rejectPlan(
  pool: pg.Pool,
  input: { planId: string; version: number; actor: string; reason: string },
  alongside?: (client: pg.PoolClient) => Promise<void>,
): Promise<{ planId: string; version: number; state: "rejected" }> {
  return inTransaction(pool, async (client) => {
    const plan = await lockPlan(client, input.planId);
    if (plan.rejected_at) {
      throw new AppError("invalid_state", `This plan was already rejected (version ${plan.rejected_version})`);
    }
    if (input.version !== plan.current_version) {
      throw new AppError(
        "version_conflict",
        `Version ${input.version} is not the current version (${plan.current_version})`,
        { currentVersion: plan.current_version },
      );
    }
    const ran = await client.query("select 1 from runs where plan_id = $1 and plan_version = $2 limit 1", [
      input.planId,
      input.version,
    ]);
    if (ran.rowCount) throw new AppError("invalid_state", "This version was already approved and runs");
    const regenerating = await client.query(
      "select id from planning_sessions where plan_id = $1 and kind = 'regenerate' and status = any($2) limit 1",
      [input.planId, OPEN_PLANNING_STATUSES],
    );
    if (regenerating.rowCount) {
      throw new AppError(
        "invalid_state",
        "The planner is still revising this plan; cancel that planning session before rejecting the plan",
        { sessionId: (regenerating.rows[0] as { id: string }).id },
      );
    }
    await client.query("update plans set rejected_at = now(), rejected_version = $2 where id = $1", [
      input.planId,
      input.version,
    ]);
    // An agent in plan mode learns it through plan.review_status; its session ends here.
    await endForRejectedPlan(client, input.planId);
    await recordAudit(client, {
      actor: input.actor,
      action: "plan.rejected",
      planId: input.planId,
      planVersion: input.version,
      detail: { reason: input.reason },
    });
    await alongside?.(client);
    return { planId: input.planId, version: input.version, state: "rejected" as const };
  });
}
