/**
 * Every action the audit log records, by name. `recordAudit` takes only these, so a new kind of
 * decision is added here first — and the audit page's wording (a `Record` over this type) then
 * fails to compile until it says how the new entry reads.
 */
export const AUDIT_ACTIONS = [
  "plan.created",
  "plan.version_created",
  "plan.approved",
  "plan.rejected",
  "plan.changes_requested",
  "plan.archived",
  "plan.restored",
  "gate.waived",
  "step.approved",
  "step.denied",
  "step.answered",
  "step.approval_expired",
  "step.retried",
  "step.skipped",
  "step.recovered",
  "run.cancelled",
  "run.paused",
  "run.resumed",
  "run.plan_adopted",
  "recovery.proposed",
  "recovery.accepted",
  "recovery.rejected",
  "recovery.auto_limit_reached",
  "recovery.auto_held",
  "recovery.auto_failed",
  "task.done",
  "task.in_progress",
  "task.todo",
  "task.cancelled",
  "signal.raised",
  "signal.cleared",
  "session.summarised",
  "planning.answered",
  "planning.cancelled",
  "planning.timed_out",
] as const;

export type AuditAction = (typeof AUDIT_ACTIONS)[number];
