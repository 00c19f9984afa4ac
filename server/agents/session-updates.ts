import type { AppContext } from "../services";
import { checkAgentTaskUpdate, type AgentTaskUpdate } from "../engine/engine";
import { AppError, isAppError } from "../errors";
import type { Step, StepInput } from "../plan-schema";
import { getPlan } from "../plans/service";
import { savePlanVersion } from "../plans/versions";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { type NewTask, type UpdatePayload, type UpdateResponse } from "./contract";
import { withSessionLock } from "./leases";
import { refuseOthersTasks } from "./lease-updates";
import { taskNumber } from "../engine/agent-signals";
import { checkNewTasks } from "./task-gates";
import { checkTaskEdits, planValidationFailed } from "./task-edit-checks";
import { DONE_STEP_STATUSES, isIn } from "../vocabulary";
import { conflictSignalKey, prepareTaskUpdates, type PreparedUpdates } from "./task-integration";
import { findSession, type SessionRow } from "./sessions";
import { loadSession, seen, tasksOf, type Loaded } from "./session-state";
import { audit } from "./session-signals";
import { actorKindOf } from "../caller-context";
import { stepIdOfTask, taskLabel } from "./task-ref";
import { authorizeSessionWork } from "./session-authority";
import { fieldEditOf } from "./task-edits";
import { workspacePlace, type WorkspacePlace } from "./workspace-calls";
import { gateFileCheck } from "./workspace-work";
import { doneUpdatesToIntegrateLater, recordPrepared, recordReports, type OperationCallers } from "./task-reports";

type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

const SEED_TO_ENGINE_STATUS = {
  TODO: "TODO",
  IN_PROGRESS: "IN_PROGRESS",
  DONE: "DONE",
  CANCELLED: "CANCELLED",
} as const;

/** Seed 003's LLM-as-a-judge on added tasks, when one is configured: `{is_approved, feedback}`. */
export type TaskJudge = (review: {
  goal: string;
  planId: string;
  traceId: string;
  tasks: NewTask[];
}) => Promise<{ is_approved: boolean; feedback: string }>;

/**
 * Seed 003's `update`. Everything is checked before anything is written: added tasks against the
 * quality gates (a failure answers `plan_validation_failed` with every problem), status changes
 * against the state machine. Then the tasks become a new plan version the run adopts, and the
 * status changes apply in the same transaction as the adoption.
 */
export async function updateSession(
  app: App,
  input: {
    sessionId?: string;
    payload: UpdatePayload;
    actor: string;
    credential?: string | null;
    /** The operation this came through: a reported DONE asks it again before its merge. */
    operation: OperationCallers;
    judge?: TaskJudge;
  },
): Promise<UpdateResponse> {
  const session = await findSession(app, input.sessionId, input.actor);
  await authorizeSessionWork(app, session, input.actor, input.credential);
  if (session.closed_at) throw new AppError("invalid_state", `Session ${session.id} is finished; start a new one`);
  await seen(app, session, input.actor);
  const loaded = await loadSession(app, session);
  const { payload } = input;

  // An agent that retries an update whose answer it lost must not get its tasks twice: a task the
  // plan already has, identical in title, hints, paths and dependencies, is not added again.
  const known = new Set(loaded.steps.map((step) => taskFingerprint(step)));
  const added = (payload.add_tasks ?? []).filter((task) => !known.has(newTaskFingerprint(task)));
  const refusedTasks = await checkAddedTasks(app, session, loaded, added, input.judge);
  if (refusedTasks) return refusedTasks;

  const updates: AgentTaskUpdate[] = (payload.update_tasks ?? []).flatMap((update) =>
    update.status
      ? [
          {
            stepId: stepIdOfTask(update),
            status: SEED_TO_ENGINE_STATUS[update.status],
            ...(update.notes && { note: update.notes }),
            ...(update.items && { items: update.items }),
          },
        ]
      : [],
  );
  refuseInstanceEdits(payload);
  const edited = await checkTaskEdits(app, session, loaded, payload, added.length, (tasks) =>
    gateFileCheck(app, session, tasks),
  );
  if (edited.kind === "refused") return edited.response;
  checkStatusChanges(loaded, updates);
  if (payload.final_summary !== undefined) checkFinalSummary(loaded, updates, added.length);

  // A DONE is integrated where the workspace is: with no worker serving it, the agent hears so
  // before anything (its added tasks included) is written.
  const place = updates.some((update) => update.status === "DONE")
    ? await workspacePlace(app, session.workspace_root)
    : undefined;
  let adoptVersion: number | undefined;
  if (added.length > 0 || edited.steps.size > 0) {
    const saved = await saveTaskChanges(app, session, loaded, { added, edited: edited.steps, actor: input.actor });
    if ("status" in saved) return saved;
    adoptVersion = saved.version;
  }
  const { prepared, reported } = await recordStatusChanges(app, session, loaded, {
    updates,
    adoptVersion,
    actor: input.actor,
    credential: input.credential ?? null,
    operation: input.operation,
    place,
  });
  if (payload.final_summary !== undefined) {
    await app.db.pool.query(
      "update agent_sessions set final_summary = $2, closed_at = now() where id = $1 and closed_at is null",
      [session.id, payload.final_summary],
    );
    await audit(app, session, input.actor, "session.summarised", { finalSummary: payload.final_summary });
  }
  // A DONE that did not become DONE says so at once, not only in the next status.
  const notDone = updates
    .filter((update) => update.status === "DONE")
    .flatMap((update) => {
      const number = taskLabel(update.stepId);
      if (reported.includes(update)) return [reportedMessage(number)];
      const applied = prepared.updates.find((candidate) => candidate.stepId === update.stepId);
      if (!applied)
        return [`Task ${number} is not DONE: its branch does not merge (signal ${conflictSignalKey(update.stepId)}).`];
      if (applied.status === "TODO")
        return [`Task ${number} went back to TODO: its verification failed (see its findings).`];
      return [];
    });
  if (notDone.length > 0) return { status: "success", message: `State updated. ${notDone.join(" ")}` };
  return { status: "success", message: "State updated successfully." };
}

/**
 * Added tasks against the quality gates, then — only what passed them (seed 003 Part 3's order) —
 * the judge, when one is configured. A refusal answers `plan_validation_failed` with every problem.
 */
async function checkAddedTasks(
  app: App,
  session: SessionRow,
  loaded: Loaded,
  added: NewTask[],
  judge: TaskJudge | undefined,
): Promise<UpdateResponse | undefined> {
  if (added.length === 0) return undefined;
  const details = await checkNewTasks(added, {
    existingTaskIds: new Set(loaded.steps.map((step) => taskNumber(step.id)).filter((id) => id !== null)),
    firstNewId: loaded.lastStepNumber + 1,
    fileExists: await gateFileCheck(app, session, added),
  });
  if (details.length === 0 && judge) {
    const trace = await app.db.pool.query<{ trace_id: string }>("select trace_id from runs where id = $1", [
      session.run_id,
    ]);
    const verdict = await judge({
      goal: session.goal,
      planId: session.plan_id,
      traceId: trace.rows[0]!.trace_id,
      tasks: added,
    });
    if (!verdict.is_approved) details.push(`The reviewing judge rejected the tasks: ${verdict.feedback}`);
  }
  return details.length > 0 ? planValidationFailed(details) : undefined;
}

/** Status changes against the engine's state machine for agent tasks: every refusal at once. */
function checkStatusChanges(loaded: Loaded, updates: AgentTaskUpdate[]): void {
  const byId = new Map(loaded.steps.map((step) => [step.id, step]));
  const problems = updates.flatMap((update) => {
    const step = byId.get(update.stepId);
    if (!step) return [`There is no task ${taskLabel(update.stepId)} in this plan.`];
    if (loaded.reported.has(step.id)) {
      return update.status === "DONE"
        ? []
        : [`Task ${taskLabel(step.id)} was reported DONE and is being merged; \`status\` says when it is settled.`];
    }
    const check = checkAgentTaskUpdate(step, loaded.statuses.get(step.id) ?? "pending", update.status);
    return check.kind === "refused" ? [check.reason] : [];
  });
  if (problems.length > 0) throw new AppError("invalid_state", problems.join(" "), { details: problems });
}

/** A fan-out instance's fields are its task's (edited there); a task's found list comes with its DONE. */
function refuseInstanceEdits(payload: UpdatePayload): void {
  const problems = (payload.update_tasks ?? []).flatMap((update) => [
    ...(update.instance !== undefined && fieldEditOf(update)
      ? [
          `Task ${update.id}[${update.instance}] is an instance of task ${update.id}: change its fields on task ${update.id}.`,
        ]
      : []),
    ...(update.items && update.status !== "DONE" ? [`Task ${update.id}: items come with DONE.`] : []),
  ]);
  if (problems.length > 0) throw new AppError("invalid_input", problems.join(" "), { details: problems });
}

/** A final summary comes only when every task is settled, now or by this very update. */
function checkFinalSummary(loaded: Loaded, updates: AgentTaskUpdate[], addedCount: number): void {
  const open = tasksOf(loaded).filter((task) => !isIn(DONE_STEP_STATUSES, task.state));
  const stillOpen = open.filter(
    (task) =>
      !updates.some((u) => u.stepId === stepIdOfTask(task) && u.status !== "TODO" && u.status !== "IN_PROGRESS"),
  );
  if ((stillOpen.length > 0 || addedCount > 0) && loaded.runStatus !== "cancelled") {
    throw new AppError(
      "invalid_state",
      `A final summary comes when every task is settled; ${stillOpen.length + addedCount} still open.`,
    );
  }
}

/** Added and edited tasks as a new plan version (the run adopts it with the status changes). */
async function saveTaskChanges(
  app: App,
  session: SessionRow,
  loaded: Loaded,
  change: { added: NewTask[]; edited: Map<string, StepInput>; actor: string },
): Promise<{ version: number } | UpdateResponse> {
  const plan = await getPlan(app.db.prisma, session.plan_id, loaded.planVersion);
  // Task numbers were promised from lastStepNumber: a concurrent change (a person's edit, another
  // update) that took numbers first makes this a version conflict, answered as one — never
  // silently renumbered behind the agent's dependencies.
  return savePlanVersion(app.db.prisma, app.tools, {
    planId: session.plan_id,
    baseVersion: plan.version,
    draft: {
      ...plan,
      steps: [
        ...plan.steps.map((step) => change.edited.get(step.id) ?? step),
        ...change.added.map((task, index) => newTaskStep(task, loaded.lastStepNumber + 1 + index)),
      ],
    },
    source: "agent",
    author: change.actor,
    changeNote: changeNoteOf(change.actor, change.added.length, change.edited.size),
  }).catch((error: unknown) => {
    // An edit that closes a cycle or names an unknown task is the plan's to find: answered in
    // seed 003's envelope like every other gate.
    if (isAppError(error) && error.code === "invalid_plan" && Array.isArray(error.details))
      return planValidationFailed((error.details as { message: string }[]).map((issue) => issue.message));
    throw error;
  });
}

/**
 * The status changes, checked against the leases and recorded with the new plan version, if any.
 * A DONE with integration work behind it (a worktree to merge, verifiers) becomes a report
 * integrated off the call (task-reports.ts); any other is integrated and recorded here.
 */
async function recordStatusChanges(
  app: App,
  session: SessionRow,
  loaded: Loaded,
  change: {
    updates: AgentTaskUpdate[];
    adoptVersion: number | undefined;
    actor: string;
    credential: string | null;
    operation: OperationCallers;
    place: WorkspacePlace | undefined;
  },
): Promise<{ prepared: PreparedUpdates; reported: AgentTaskUpdate[] }> {
  const { adoptVersion, actor } = change;
  // A task another agent holds is refused before anything is recorded.
  if (actorKindOf(actor) === "agent" && change.updates.length > 0) {
    await withSessionLock(app, session.id, (client) =>
      refuseOthersTasks(
        client,
        session.id,
        actor,
        change.updates.map((update) => update.stepId),
      ),
    );
  }
  // A DONE already reported (a retry whose answer was lost) is that report.
  const updates = change.updates.filter((update) => !(update.status === "DONE" && loaded.reported.has(update.stepId)));
  const reported = await doneUpdatesToIntegrateLater(session, loaded, updates, change.place);
  await recordReports(app, session, { actor, credential: change.credential, operation: change.operation }, reported);
  const now = updates.filter((update) => !reported.includes(update));
  // Whatever is left runs here: a DONE in a plain directory without verifiers has nothing to integrate.
  const prepared = await prepareTaskUpdates(app.db.pool, {
    runId: session.run_id,
    steps: loaded.steps,
    statuses: loaded.statuses,
    updates: now,
    actor,
    tools: app.tools,
  });
  await recordPrepared(app, session, loaded, prepared, { actor, adoptVersion });
  return { prepared, reported: [...reported, ...change.updates.filter((update) => !updates.includes(update))] };
}

/** What the agent hears of a DONE whose integration runs off its call. */
function reportedMessage(task: string): string {
  return (
    `Task ${task} is reported DONE: Stepwise is committing, checking and merging it, and it is DONE once ` +
    "merged. A failed check sends it back as TODO with the findings, a conflict raises a blocker; `status` says which."
  );
}

function changeNoteOf(actor: string, added: number, edited: number): string {
  const parts = [
    ...(added > 0 ? [`added ${added} task${added === 1 ? "" : "s"}`] : []),
    ...(edited > 0 ? [`edited ${edited} task${edited === 1 ? "" : "s"}`] : []),
  ];
  return `${actor} ${parts.join(" and ")}`;
}

function taskFingerprint(step: Step): string {
  return JSON.stringify([step.title ?? "", step.contextHints, step.relevantFilePaths, step.dependsOn]);
}

function newTaskFingerprint(task: NewTask): string {
  return JSON.stringify([
    task.title?.trim() ?? "",
    task.context_hints ?? [],
    task.relevant_file_paths ?? [],
    task.dependencies.map((id) => `step_${id}`),
  ]);
}

function newTaskStep(task: NewTask, number: number): StepInput {
  const acceptance = (task.acceptance ?? []).map((line) => line.trim()).filter(Boolean);
  const verify = (task.verify ?? []).filter((command) => command.trim());
  return {
    ...((acceptance.length > 0 || verify.length > 0) && {
      args: { ...(acceptance.length > 0 && { acceptance }), ...(verify.length > 0 && { verify }) },
    }),
    id: `step_${number}`,
    title: task.title!.trim(),
    description: task.description ?? "",
    tool: AGENT_TASK_TOOL,
    type: task.type as StepInput["type"],
    dependsOn: task.dependencies.map((id) => `step_${id}`),
    contextHints: task.context_hints ?? [],
    relevantFilePaths: task.relevant_file_paths ?? [],
    ...(task.acceptance?.length && { acceptance: task.acceptance }),
  };
}
