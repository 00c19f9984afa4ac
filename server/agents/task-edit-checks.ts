import type { AppContext } from "../services";
import { AppError } from "../errors";
import type { Step, StepInput } from "../plan-schema";
import { planValidationFailedSchema, type NewTask, type UpdatePayload, type UpdateResponse } from "./contract";
import { taskNumber } from "../engine/agent-signals";
import { checkNewTasks, type GateContext } from "./task-gates";
import { applyTaskEdit, fieldEditOf, refuseTaskEdit, taskOfStep } from "./task-edits";
import type { SessionRow } from "./sessions";
import type { Loaded } from "./session-state";

type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

/**
 * The tasks `update_tasks` changes beyond their status, checked by the gates an added task passes.
 * A task whose definition a person approved (the run's approved version, by a person) waits for a
 * new approval once edited: an approval covers exactly what it was given.
 */
export async function checkTaskEdits(
  app: App,
  session: SessionRow,
  loaded: Loaded,
  payload: UpdatePayload,
  addedCount: number,
  fileCheck: (tasks: NewTask[]) => Promise<GateContext["fileExists"]>,
): Promise<{ kind: "ok"; steps: Map<string, StepInput> } | { kind: "refused"; response: UpdateResponse }> {
  const edits = (payload.update_tasks ?? []).flatMap((update) => {
    const edit = fieldEditOf(update);
    return edit ? [{ id: update.id, edit }] : [];
  });
  const steps = new Map<string, StepInput>();
  if (edits.length === 0) return { kind: "ok", steps };
  const byId = new Map(loaded.steps.map((step) => [step.id, step]));
  const refusals = edits.flatMap(({ id }) => {
    const reason = refuseTaskEdit(byId.get(`step_${id}`), id, loaded.statuses.get(`step_${id}`) ?? "pending");
    return reason ? [reason] : [];
  });
  if (refusals.length > 0) throw new AppError("invalid_state", refusals.join(" "), { details: refusals });
  const tasks = edits.map(({ id, edit }) => ({ ...taskOfStep(byId.get(`step_${id}`)!), ...edit }));
  const details = await checkNewTasks(tasks, {
    existingTaskIds: new Set(loaded.steps.map((step) => taskNumber(step.id)).filter((id) => id !== null)),
    firstNewId: loaded.lastStepNumber + 1 + addedCount,
    fileExists: await fileCheck(tasks),
  });
  if (details.length > 0) {
    return {
      kind: "refused",
      response: planValidationFailed(details),
    };
  }
  const approved = await personApprovedSteps(app, session.run_id);
  for (const [index, { id, edit }] of edits.entries()) {
    const step = byId.get(`step_${id}`)!;
    const next = applyTaskEdit(step, edit);
    const before = approved.get(step.id);
    if (before && JSON.stringify(taskOfStep(before)) !== JSON.stringify(tasks[index])) next.approvalRequired = true;
    steps.set(step.id, next);
  }
  return { kind: "ok", steps };
}

/** The steps of the version a person approved for this run, by id (none when no person approved it). */
async function personApprovedSteps(app: App, runId: string): Promise<Map<string, Step>> {
  const rows = await app.db.pool.query<{ steps: Step[] }>(
    `select v.steps from audit_entries a
       join runs r on r.id = a.run_id
       join plan_versions v on v.plan_id = r.plan_id and v.version = a.plan_version
      where a.run_id = $1 and a.action = 'plan.approved' and a.actor_kind = 'person'
      order by a.id limit 1`,
    [runId],
  );
  return new Map((rows.rows[0]?.steps ?? []).map((step) => [step.id, step]));
}

/** Seed 003's refusal of a task list, with one actionable detail per problem. */
export function planValidationFailed(details: string[]): UpdateResponse {
  return planValidationFailedSchema.parse({
    status: "error",
    error_type: "plan_validation_failed",
    message: "The submitted plan is invalid and was rejected. You must fix the plan and resubmit.",
    details,
  });
}
