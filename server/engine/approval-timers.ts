import { inTransaction } from "../db";
import type { StepStatus } from "../plan-schema";
import { advance } from "./advance";
import type { EngineDeps } from "./deps";
import { audit, openRunTransaction, type RunTransaction, type StepWaiting } from "./run-transaction";
import { FINISHED_RUN_STATUSES, isIn } from "../vocabulary";

/** Loads a gated step's wait if it is still the one `expiresAt` belongs to. */
async function currentApprovalWait(tx: RunTransaction, stepId: string, expiresAt: string): Promise<boolean> {
  const row = await tx.client.query<{ status: StepStatus; waiting: StepWaiting | null }>(
    "select status, waiting from run_steps where run_id = $1 and step_id = $2",
    [tx.run.id, stepId],
  );
  const current = row.rows[0];
  return (
    current?.status === "awaiting_approval" &&
    current.waiting?.kind === "approval" &&
    current.waiting.expiresAt === expiresAt
  );
}

type ApprovalTimer = { runId: string; stepId: string; expiresAt: string };

/** Runs `apply` only while `job`'s wait is still the step's current one; a stale timer does nothing. */
async function onApprovalWait(
  deps: EngineDeps,
  job: ApprovalTimer,
  apply: (tx: RunTransaction) => Promise<void>,
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await openRunTransaction(deps, client, job.runId);
    if (!tx || isIn(FINISHED_RUN_STATUSES, tx.run.status)) return;
    if (!(await currentApprovalWait(tx, job.stepId, job.expiresAt))) return;
    await apply(tx);
    await tx.flush();
  });
}

/** Timer job: the approval of `stepId` expires soon. */
export function warnApprovalExpiring(deps: EngineDeps, job: ApprovalTimer): Promise<void> {
  return onApprovalWait(deps, job, async (tx) => {
    tx.events.push({ type: "approval.expiring", stepId: job.stepId, data: { expiresAt: job.expiresAt } });
  });
}

/** Timer job: nobody decided on `stepId` in time, so it is skipped with the reason. */
export function expireApproval(deps: EngineDeps, job: ApprovalTimer): Promise<void> {
  return onApprovalWait(deps, job, async (tx) => {
    const minutes = Math.round(tx.run.approval_timeout_ms / 60_000);
    const waited =
      minutes >= 1 ? `${minutes} minute${minutes === 1 ? "" : "s"}` : `${tx.run.approval_timeout_ms / 1000} s`;
    tx.statuses.set(job.stepId, "awaiting_approval");
    tx.setStatus(job.stepId, "skipped", `No approval decision within ${waited}`);
    tx.run.open_steps--;
    await audit(tx, "system", "step.approval_expired", job.stepId, { expiresAt: job.expiresAt });
    await advance(tx, [job.stepId]);
  });
}
