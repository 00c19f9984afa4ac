import { AppError } from "../errors";
import type { PlannerDeps } from "./deps";
import { decideRecovery, proposeRecovery } from "./recovery-proposals";
import type { AuditAction } from "../audit/actions";
import { recordAudit } from "../audit/audit-log";
import { prismaQueryable } from "../db";

/** Who the audit log names for what the `auto` recovery policy decides. */
export const AUTO_RECOVERY_ACTOR = "policy:auto-recovery";
/** Automatic recoveries per step; after that the step waits for a person, so no loop runs for ever. */
export const AUTO_RECOVERY_LIMIT = 2;

export type AutoRecoveryOutcome = "applied" | "held_abort" | "limit_reached" | "not_applicable" | "failed";

/**
 * The `auto_recover` job of a failed step in a run whose policy is `auto`: ask the planner for a
 * recovery and apply it without a person, audited as `policy:auto-recovery`. Bounded per step by
 * AUTO_RECOVERY_LIMIT. An abort is never applied automatically: it stays proposed for a person.
 * Provider failures are audited, not retried: the step stays failed for a person, as under `ask`.
 */
export async function autoRecover(
  deps: PlannerDeps,
  job: { runId: string; stepId: string; attempt: number },
): Promise<AutoRecoveryOutcome> {
  const run = await deps.prisma.run.findUnique({ where: { id: job.runId } });
  if (!run || run.recoveryPolicy !== "auto" || run.status === "cancelled" || run.status === "completed") {
    return "not_applicable";
  }
  const step = await deps.prisma.runStep.findUnique({
    where: { runId_stepId: { runId: job.runId, stepId: job.stepId } },
  });
  // Someone already acted on this failure (a person's retry or skip), or it is an older attempt.
  if (!step || step.status !== "failed" || step.attempt !== job.attempt) return "not_applicable";
  // Through recordAudit like every entry: it alone appends to the audit chain.
  const audit = (action: AuditAction, detail: Record<string, unknown>) =>
    recordAudit(prismaQueryable(deps.prisma), {
      actor: AUTO_RECOVERY_ACTOR,
      action,
      planId: run.planId,
      planVersion: run.planVersion,
      runId: run.id,
      stepId: job.stepId,
      detail,
    });
  const used = await deps.prisma.recoveryProposal.count({
    where: { runId: job.runId, stepId: job.stepId, automatic: true },
  });
  if (used >= AUTO_RECOVERY_LIMIT) {
    await audit("recovery.auto_limit_reached", { limit: AUTO_RECOVERY_LIMIT, attempt: job.attempt });
    return "limit_reached";
  }
  try {
    const proposal = await proposeRecovery(deps, {
      runId: job.runId,
      stepId: job.stepId,
      actor: AUTO_RECOVERY_ACTOR,
      automatic: true,
    });
    if (proposal.action.kind === "abort") {
      await audit("recovery.auto_held", { proposalId: proposal.id, reason: "an abort needs a person" });
      return "held_abort";
    }
    await decideRecovery(deps, { proposalId: proposal.id, accept: true, actor: AUTO_RECOVERY_ACTOR });
    return "applied";
  } catch (error) {
    await audit("recovery.auto_failed", {
      attempt: job.attempt,
      error: error instanceof AppError || error instanceof Error ? error.message : String(error),
    });
    return "failed";
  }
}
