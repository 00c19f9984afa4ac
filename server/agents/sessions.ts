import fs from "node:fs/promises";
import type { AppContext } from "../services";
import type { AuditAction } from "../audit/actions";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import {
  adoptPlanVersionIntoRun,
  checkAgentTaskUpdate,
  pauseRunForSignal,
  resumeRunAfterSignal,
  retryStep,
  startRun,
  updateAgentTasks,
  type AgentTaskUpdate,
} from "../engine/engine";
import { AppError, isAppError } from "../errors";
import { appendEvents } from "../events/store";
import type { NewEvent } from "../events/types";
import type { Step, StepInput, StepStatus } from "../plan-schema";
import { createPlan, getPlan } from "../plans/service";
import { workspaceForNewWork } from "../plans/workspaces";
import { savePlanVersion } from "../plans/versions";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { resolveInWorkspace } from "../tools/workspace-path";
import {
  planValidationFailedSchema,
  type AgentTaskView,
  type ApproverNote,
  type NewTask,
  type StatusResponse,
  type UpdatePayload,
  type UpdateResponse,
} from "./contract";
import { decideNow } from "./decide";
import {
  DEFAULT_AGENT_CONCURRENCY,
  handOutTask,
  noteAgentCall,
  refuseOthersTasks,
  settleLeases,
  withSessionLock,
  agentsOfSession,
} from "./leases";
import { AGENT_INSTRUCTIONS, AGENT_INSTRUCTIONS_VERSION } from "./instructions";
import { taskNumber, upsertSignal } from "../engine/agent-signals";
import { openSignals, type OpenSignal, type SignalLevel } from "./signal-store";
import { isAuthorRefusal, pendingSessionStatus, requestSession } from "./session-requests";
import { checkNewTasks } from "./task-gates";
import { applyTaskEdit, fieldEditOf, refuseTaskEdit, taskOfStep } from "./task-edits";
import { DONE_STEP_STATUSES, isIn } from "../vocabulary";
import { verifierCommands } from "../tools/agent-task";
import {
  afterTaskUpdates,
  conflictSignalKey,
  latestVerifications,
  prepareTaskUpdates,
  removeWorktreesOfFinishedRuns,
} from "./task-integration";
import { taskWorkingDirectory } from "./task-working-directory";
import { findingsNote } from "./verifiers";
import { actorKindOf } from "../caller-context";

/**
 * Agent sessions (seed 003): a goal, a plan whose steps are the agent's tasks (and any tool steps
 * a person adds, such as the tests after a code task), the run that executes it, and signals.
 * The engine owns step states; this module translates between the seed's contract and the engine,
 * and checks everything an agent sends before anything is written.
 */
type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

export interface SessionRow {
  id: string;
  goal: string;
  workspace_root: string;
  plan_id: string;
  run_id: string;
  instructions_version: string | null;
  final_summary: string | null;
  created_by: string;
  created_at: Date;
  closed_at: Date | null;
  last_seen_at: Date | null;
  planning_session_id: string | null;
  agent_concurrency: number;
  lease_seconds: number;
}

const MAX_GOAL = 4_000;

export async function startSession(
  app: App,
  input: {
    goal: string;
    /** A registered workspace's id or path; the server's default when omitted. */
    workspace?: string;
    actor: string;
    /** Whether a directory not yet registered may be registered for the session: a person's call only. */
    mayRegisterWorkspace?: boolean;
    /** The plan's first tasks; by default seed 003's decomposition meta-task. */
    steps?: StepInput[];
    /** A seed 000 todo plan's owner (an MCP session); see `server/agents/todo-plans.ts`. */
    todoKey?: string;
    /** Agent tasks in progress at once (several agents, one plan); the default is 3. */
    agentConcurrency?: number;
    /** How long a handed-out task stays an agent's without it calling; the default is 600 s. */
    leaseSeconds?: number;
  },
): Promise<StartedSession> {
  const goal = input.goal.trim();
  if (!goal) throw new AppError("invalid_input", 'A session needs a goal: --goal "what to achieve"');
  if (goal.length > MAX_GOAL) throw new AppError("invalid_input", `The goal is limited to ${MAX_GOAL} characters`);
  const workspace = await workspaceForNewWork(app.db.pool, {
    ...(input.workspace !== undefined && { named: input.workspace }),
    defaultRoot: app.workspaceRoot,
    mayRegister: input.mayRegisterWorkspace === true,
  });
  const workspaceRoot = workspace.path;
  // Worktrees (issue "Parallel agent work"): leftovers of the workspace's finished runs go.
  await removeWorktreesOfFinishedRuns(app.db.pool, workspaceRoot);
  const plan = await createPlan(app.db.prisma, app.tools, {
    draft: {
      goal,
      summary: input.steps
        ? "An agent's plan: the agent works through its steps and reports each."
        : "An agent session: the agent decomposes the goal, then works task by task.",
      steps: input.steps ?? [decompositionTask(goal)],
    },
    source: "agent",
    author: input.actor,
    workspaceId: workspace.id,
    ...(input.todoKey && { checklist: true }),
  });
  let runId: string;
  try {
    ({ runId } = await startRun(app.engine, {
      planId: plan.id,
      version: plan.version,
      actor: input.actor,
      workspaceRoot,
      workspaceId: workspace.id,
    }));
  } catch (error) {
    // The workspace's approver policy: the agent wrote this plan, so someone else approves it, and
    // the session waits for that instead of leaving a plan no session knows of.
    if (input.todoKey || !isAuthorRefusal(error, input.actor)) throw error;
    const { sessionId } = await requestSession(app, {
      goal,
      workspaceRoot,
      planId: plan.id,
      version: plan.version,
      actor: input.actor,
      ...(input.agentConcurrency !== undefined && { agentConcurrency: input.agentConcurrency }),
      ...(input.leaseSeconds !== undefined && { leaseSeconds: input.leaseSeconds }),
    });
    return { sessionId, planId: plan.id, awaitingApproval: { author: input.actor } };
  }
  const sessionId = await insertSession(app, {
    goal,
    workspaceRoot,
    planId: plan.id,
    runId,
    actor: input.actor,
    todoKey: input.todoKey,
    agentConcurrency: input.agentConcurrency,
    leaseSeconds: input.leaseSeconds,
  });
  return { sessionId, planId: plan.id, runId };
}

/** A started session, or one whose plan waits for a person other than its author to approve it. */
export type StartedSession =
  | { sessionId: string; planId: string; runId: string; awaitingApproval?: undefined }
  | { sessionId: string; planId: string; runId?: undefined; awaitingApproval: { author: string } };

/** Task 1 of every session: seed 003's meta-task, decomposing the goal into tasks. */
function decompositionTask(goal: string): StepInput {
  const shown = goal.length > 120 ? `${goal.slice(0, 117)}…` : goal;
  return {
    id: "step_1",
    title: `Decompose the goal '${shown}' into a detailed task list for Stepwise.`,
    description: `Goal: ${goal}`,
    tool: AGENT_TASK_TOOL,
    type: "chore",
    contextHints: [
      "Read the goal and every document it names (a spec, an issue) before planning.",
      "Follow the planning guide in `docs/agents.md`: one responsibility per task, with a type, actionable context_hints and relevant_file_paths that exist.",
      "Submit the tasks with `add_tasks` and mark this task DONE in the same update.",
    ],
    // Decomposing reads the whole workspace.
    relevantFilePaths: ["."],
  };
}

/** Seed 003's ids read like `user-auth-1678886400`: the goal's first words and the time. */
export function sessionIdFor(goal: string, now: Date): string {
  const words = goal
    .toLowerCase()
    .normalize("NFKD")
    .replace(/[^a-z0-9\s-]/g, " ")
    .split(/[\s-]+/)
    .filter(
      (word) =>
        word.length > 1 && !["the", "and", "for", "into", "with", "from", "in", "to", "of", "an"].includes(word),
    )
    .slice(0, 4);
  return `${words.join("-") || "session"}-${Math.floor(now.getTime() / 1000)}`;
}

export async function insertSession(
  app: Pick<App, "db">,
  input: {
    /** The id promised to the agent before the session existed (see session-requests.ts). */
    id?: string;
    goal: string;
    workspaceRoot: string;
    planId: string;
    runId: string;
    actor: string;
    todoKey?: string;
    /** An agent's plan-mode session whose approved plan this session executes. */
    planningSessionId?: string;
    agentConcurrency?: number;
    leaseSeconds?: number;
  },
): Promise<string> {
  const base = input.id ?? sessionIdFor(input.goal, new Date());
  for (let suffix = 1; ; suffix++) {
    const id = suffix === 1 ? base : `${base}-${suffix}`;
    const inserted = await app.db.pool.query(
      `insert into agent_sessions (id, goal, workspace_root, plan_id, run_id, created_by, todo_key, planning_session_id,
         agent_concurrency, lease_seconds)
       values ($1, $2, $3, $4, $5, $6, $7, $8, coalesce($9, $11::int), coalesce($10, 600)) on conflict (id) do nothing`,
      [
        id,
        input.goal,
        input.workspaceRoot,
        input.planId,
        input.runId,
        input.actor,
        input.todoKey ?? null,
        input.planningSessionId ?? null,
        input.agentConcurrency ?? null,
        input.leaseSeconds ?? null,
        DEFAULT_AGENT_CONCURRENCY,
      ],
    );
    if (inserted.rowCount) return id;
  }
}

/**
 * The named session, or — as seed 003's commands name none — the newest one still open, else the
 * newest finished one (so `status` after the final summary says the session is complete). Among
 * open sessions the caller's own come first: an agent whose plan a person approved is handed that
 * plan's session, not another agent's newer one.
 */
export async function findSession(app: Pick<App, "db">, sessionId?: string, caller?: string): Promise<SessionRow> {
  const rows = sessionId
    ? await app.db.pool.query<SessionRow>("select * from agent_sessions where id = $1", [sessionId])
    : await app.db.pool.query<SessionRow>(
        // Seed 000 todo plans belong to their MCP session, never to a caller who names none.
        `select * from agent_sessions where todo_key is null
         order by closed_at is null desc, created_by = $1 desc, created_at desc limit 1`,
        [caller ?? ""],
      );
  const row = rows.rows[0];
  if (!row) {
    const pending = await pendingSessionStatus(app, sessionId, caller);
    if (pending) throw new AppError("invalid_state", `Session ${pending.session.id}: ${pending.now.message}`);
    throw new AppError(
      "not_found",
      sessionId ? `No session ${sessionId}` : 'No session yet. Start one with: stepwise start --goal "what to achieve"',
    );
  }
  return row;
}

interface Loaded {
  session: SessionRow;
  runStatus: string;
  approverNotes: ApproverNote[];
  steps: Step[];
  statuses: Map<string, StepStatus>;
  signals: OpenSignal[];
  lastStepNumber: number;
  planVersion: number;
}

/**
 * Reads a session's state. A plan version newer than the run's (a person's edit in the browser,
 * or tasks added just before a crash) is adopted into the run first, so what the agent is told
 * always matches the plan people see.
 */
async function loadSession(app: App, session: SessionRow): Promise<Loaded> {
  const [plan, run] = await Promise.all([
    app.db.pool.query<{ current_version: number; last_step_number: number }>(
      "select current_version, last_step_number from plans where id = $1",
      [session.plan_id],
    ),
    app.db.pool.query<{ plan_version: number }>("select plan_version from runs where id = $1", [session.run_id]),
  ]);
  const current = plan.rows[0]!.current_version;
  if (current > run.rows[0]!.plan_version) {
    await adoptPlanVersionIntoRun(app.engine, { runId: session.run_id, version: current, actor: "stepwise" }).catch(
      (error: unknown) => {
        // A version that cannot be adopted (it removes a step that already ran) leaves the run on its version.
        if (!(error instanceof AppError)) throw error;
      },
    );
  }
  const [runRow, stepRows, signals, stepNotes] = await Promise.all([
    app.db.pool.query<{ status: string; plan_version: number; approved_by: string; approval_note: string | null }>(
      "select status, plan_version, approved_by, approval_note from runs where id = $1",
      [session.run_id],
    ),
    app.db.pool.query<{ step_id: string; status: StepStatus }>(
      "select step_id, status from run_steps where run_id = $1",
      [session.run_id],
    ),
    openSignals(app.db.pool, session.id),
    app.db.pool.query<{ step_id: string; actor: string; comment: string }>(
      `select step_id, actor, comment from approvals
        where run_id = $1 and comment is not null and comment <> '' order by id`,
      [session.run_id],
    ),
  ]);
  const planVersion = runRow.rows[0]!.plan_version;
  const runInfo = runRow.rows[0]!;
  const approverNotes: ApproverNote[] = [
    ...(runInfo.approval_note ? [{ about: "plan", by: runInfo.approved_by, note: runInfo.approval_note }] : []),
    ...stepNotes.rows.map((row) => ({ about: row.step_id, by: row.actor, note: row.comment })),
  ];
  const version = await app.db.pool.query<{ steps: Step[] }>(
    "select steps from plan_versions where plan_id = $1 and version = $2",
    [session.plan_id, planVersion],
  );
  return {
    session,
    runStatus: runRow.rows[0]!.status,
    approverNotes,
    steps: version.rows[0]!.steps,
    statuses: new Map(stepRows.rows.map((row) => [row.step_id, row.status])),
    signals,
    lastStepNumber: plan.rows[0]!.last_step_number,
    planVersion,
  };
}

const SEED_STATUS: Record<StepStatus, AgentTaskView["status"]> = {
  pending: "TODO",
  blocked: "TODO",
  ready: "TODO",
  awaiting_approval: "TODO",
  awaiting_input: "TODO",
  awaiting_agent: "TODO",
  failed: "TODO",
  running: "IN_PROGRESS",
  completed: "DONE",
  skipped: "CANCELLED",
  cancelled: "CANCELLED",
};

export function taskView(step: Step, status: StepStatus): AgentTaskView {
  return {
    id: taskNumber(step.id) ?? 0,
    title: step.title ?? step.description.split("\n")[0]!.slice(0, 200),
    ...(step.type && { type: step.type }),
    status: SEED_STATUS[status],
    dependencies: step.dependsOn.map((dep) => taskNumber(dep) ?? 0),
    context_hints: step.contextHints,
    relevant_file_paths: step.relevantFilePaths,
    ...(step.acceptance?.length && { acceptance: step.acceptance }),
    executor: step.tool === AGENT_TASK_TOOL ? "agent" : "stepwise",
    state: status,
    ...taskChecksView(step),
  };
}

function tasksOf(loaded: Loaded): AgentTaskView[] {
  return loaded.steps.map((step) => taskView(step, loaded.statuses.get(step.id) ?? "pending"));
}

/** The agent called: the session's idle time starts again (the run page shows it). */
async function seen(app: Pick<App, "db">, session: SessionRow, caller: string | undefined): Promise<void> {
  if (caller === undefined) return;
  await app.db.pool.query("update agent_sessions set last_seen_at = now() where id = $1", [session.id]);
  // Any call is the agent's heartbeat: its leases run on.
  await noteAgentCall(app, session.id, caller, { listed: actorKindOf(caller) !== "person" });
}

/** Seed 003's `status`. The first call of a session (or after new instructions) syncs them. */
export async function sessionStatus(app: App, sessionId?: string, caller?: string): Promise<StatusResponse> {
  const pending = await pendingSessionStatus(app, sessionId, caller);
  if (pending) return pending;
  const session = await findSession(app, sessionId, caller);
  await seen(app, session, caller);
  const loaded = await loadSession(app, session);
  const delivered = session.instructions_version === AGENT_INSTRUCTIONS_VERSION;
  const state = {
    session: { id: session.id, goal: session.goal, finalSummary: session.final_summary },
    instructions: { content: AGENT_INSTRUCTIONS, delivered },
    signals: loaded.signals,
    tasks: tasksOf(loaded),
    runStatus: loaded.runStatus,
    approverNotes: loaded.approverNotes,
  };
  let response = decideNow(state);
  // A task would be handed out: which one is this caller's is the lease hand-out's decision.
  if (response.now.reason === "ready_for_task" && caller !== undefined) {
    const handOut = await handOutTask(app, session, caller, {
      steps: loaded.steps,
      approverNotes: loaded.approverNotes,
      mayStartNew: loaded.runStatus !== "paused",
    });
    const assignees = new Map(handOut.leases.map((lease) => [lease.step_id, lease.agent]));
    const tasks = state.tasks.map((task) => {
      const assignee = assignees.get(`step_${task.id}`);
      return assignee ? { ...task, assignee } : task;
    });
    response = decideNow({
      ...state,
      tasks,
      assignment:
        handOut.kind === "task"
          ? { taskId: taskNumber(handOut.stepId) ?? 0, brief: handOut.brief }
          : { taskId: null, capReached: handOut.capReached, cap: handOut.cap },
    });
  }
  // The task handed out gets its working directory (its worktree) and its last findings.
  response = await briefCurrentTask(app.db.pool, session, response);
  if (!delivered) {
    await app.db.pool.query("update agent_sessions set instructions_version = $2 where id = $1", [
      session.id,
      AGENT_INSTRUCTIONS_VERSION,
    ]);
  }
  return response;
}

const SEED_TO_ENGINE_STATUS = {
  TODO: "TODO",
  IN_PROGRESS: "IN_PROGRESS",
  DONE: "DONE",
  CANCELLED: "CANCELLED",
} as const;

/**
 * Seed 003's `update`. Everything is checked before anything is written: added tasks against the
 * quality gates (a failure answers `plan_validation_failed` with every problem), status changes
 * against the state machine. Then the tasks become a new plan version the run adopts, and the
 * status changes apply in the same transaction as the adoption.
 */
/** Seed 003's LLM-as-a-judge on added tasks, when one is configured: `{is_approved, feedback}`. */
export type TaskJudge = (review: {
  goal: string;
  planId: string;
  traceId: string;
  tasks: NewTask[];
}) => Promise<{ is_approved: boolean; feedback: string }>;

export async function updateSession(
  app: App,
  input: { sessionId?: string; payload: UpdatePayload; actor: string; judge?: TaskJudge },
): Promise<UpdateResponse> {
  const session = await findSession(app, input.sessionId, input.actor);
  if (session.closed_at) throw new AppError("invalid_state", `Session ${session.id} is finished; start a new one`);
  await seen(app, session, input.actor);
  const loaded = await loadSession(app, session);
  const { payload } = input;

  // An agent that retries an update whose answer it lost must not get its tasks twice: a task the
  // plan already has, identical in title, hints, paths and dependencies, is not added again.
  const known = new Set(loaded.steps.map((step) => taskFingerprint(step)));
  const added = (payload.add_tasks ?? []).filter((task) => !known.has(newTaskFingerprint(task)));
  if (added.length > 0) {
    const details = await checkNewTasks(added, {
      existingTaskIds: new Set(loaded.steps.map((step) => taskNumber(step.id)).filter((id) => id !== null)),
      firstNewId: loaded.lastStepNumber + 1,
      fileExists: (relativePath) => existsIn(session.workspace_root, relativePath),
    });
    // The judge reviews only what passed the objective gates (seed 003 Part 3's order).
    if (details.length === 0 && input.judge) {
      const trace = await app.db.pool.query<{ trace_id: string }>("select trace_id from runs where id = $1", [
        session.run_id,
      ]);
      const verdict = await input.judge({
        goal: session.goal,
        planId: session.plan_id,
        traceId: trace.rows[0]!.trace_id,
        tasks: added,
      });
      if (!verdict.is_approved) details.push(`The reviewing judge rejected the tasks: ${verdict.feedback}`);
    }
    if (details.length > 0) {
      return planValidationFailed(details);
    }
  }

  const updates: AgentTaskUpdate[] = (payload.update_tasks ?? []).flatMap((update) =>
    update.status
      ? [
          {
            stepId: `step_${update.id}`,
            status: SEED_TO_ENGINE_STATUS[update.status],
            ...(update.notes && { note: update.notes }),
          },
        ]
      : [],
  );
  const edited = await checkTaskEdits(app, session, loaded, payload, added.length);
  if (edited.kind === "refused") return edited.response;
  const byId = new Map(loaded.steps.map((step) => [step.id, step]));
  const problems = updates.flatMap((update) => {
    const step = byId.get(update.stepId);
    if (!step) return [`There is no task ${update.stepId.slice(5)} in this plan.`];
    const check = checkAgentTaskUpdate(step, loaded.statuses.get(step.id) ?? "pending", update.status);
    return check.kind === "refused" ? [check.reason] : [];
  });
  if (problems.length > 0) throw new AppError("invalid_state", problems.join(" "), { details: problems });

  if (payload.final_summary !== undefined) {
    // Tasks not settled now and not settled by this very update.
    const open = tasksOf(loaded).filter((task) => !isIn(DONE_STEP_STATUSES, task.state));
    const stillOpen = open.filter(
      (task) =>
        !updates.some((u) => u.stepId === `step_${task.id}` && u.status !== "TODO" && u.status !== "IN_PROGRESS"),
    );
    if ((stillOpen.length > 0 || added.length > 0) && loaded.runStatus !== "cancelled") {
      throw new AppError(
        "invalid_state",
        `A final summary comes when every task is settled; ${stillOpen.length + added.length} still open.`,
      );
    }
  }

  let adoptVersion: number | undefined;
  if (added.length > 0 || edited.steps.size > 0) {
    const plan = await getPlan(app.db.prisma, session.plan_id, loaded.planVersion);
    // Task numbers were promised from lastStepNumber: a concurrent change (a person's edit, another
    // update) that took numbers first makes this a version conflict, answered as one — never
    // silently renumbered behind the agent's dependencies.
    const saved = await savePlanVersion(app.db.prisma, app.tools, {
      planId: session.plan_id,
      baseVersion: plan.version,
      draft: {
        ...plan,
        steps: [
          ...plan.steps.map((step) => edited.steps.get(step.id) ?? step),
          ...added.map((task, index) => newTaskStep(task, loaded.lastStepNumber + 1 + index)),
        ],
      },
      source: "agent",
      author: input.actor,
      changeNote: changeNoteOf(input.actor, added.length, edited.steps.size),
    }).catch((error: unknown) => {
      // An edit that closes a cycle or names an unknown task is the plan's to find: answered in
      // seed 003's envelope like every other gate.
      if (isAppError(error) && error.code === "invalid_plan" && Array.isArray(error.details))
        return planValidationFailed((error.details as { message: string }[]).map((issue) => issue.message));
      throw error;
    });
    if ("status" in saved) return saved;
    adoptVersion = saved.version;
  }
  // A task another agent holds is refused before its verifiers run or its branch merges.
  const byAgent = actorKindOf(input.actor) === "agent";
  if (byAgent && updates.length > 0) {
    await withSessionLock(app, session.id, (client) =>
      refuseOthersTasks(
        client,
        session.id,
        input.actor,
        updates.map((update) => update.stepId),
      ),
    );
  }
  // DONE runs the task's verifiers and merges its branch (server/agents/task-integration.ts); a
  // failed check turns it into TODO with the findings, a conflict holds it behind a blocker.
  const prepared = await prepareTaskUpdates(app.db.pool, {
    runId: session.run_id,
    steps: loaded.steps,
    statuses: loaded.statuses,
    updates,
    actor: input.actor,
    tools: app.tools,
  });
  // A conflict the merge above resolved is cleared before the task's DONE is recorded: that DONE
  // may finish the run, and a person's live view stops following a finished run's events.
  const open = new Set((await openSignals(app.db.pool, session.id)).map((signal) => signal.id));
  for (const key of prepared.resolved.filter((key) => open.has(key))) await clearSignal(app, session, key, "stepwise");
  if (prepared.updates.length > 0 || adoptVersion !== undefined) {
    // Under the session's hand-out lock: checked again (a hand-out may have come between), and the
    // leases follow the reported states (DONE ends one, IN_PROGRESS takes an unheld task).
    await withSessionLock(app, session.id, async (client) => {
      if (byAgent) {
        await refuseOthersTasks(
          client,
          session.id,
          input.actor,
          prepared.updates.map((update) => update.stepId),
        );
      }
      await updateAgentTasks(app.engine, {
        runId: session.run_id,
        updates: prepared.updates,
        actor: input.actor,
        adoptVersion,
      });
      await settleLeases(app, client, session, input.actor, prepared.updates, {
        steps: loaded.steps,
        approverNotes: loaded.approverNotes,
      });
    });
  }
  await afterTaskUpdates(app.db.pool, {
    runId: session.run_id,
    updates: prepared.updates,
    merged: prepared.merged,
    mergedTips: prepared.mergedTips,
  });
  for (const conflict of prepared.conflicts) {
    await alertSession(app, {
      sessionId: session.id,
      alert: {
        id: conflict.key,
        level: "blocker",
        message: conflict.message,
        ...(conflict.taskId !== null && { task_id: conflict.taskId }),
      },
      actor: "stepwise",
    });
  }
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
      const number = update.stepId.slice(5);
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

/** Seed 003's refusal of a task list, with one actionable detail per problem. */
function planValidationFailed(details: string[]): UpdateResponse {
  return planValidationFailedSchema.parse({
    status: "error",
    error_type: "plan_validation_failed",
    message: "The submitted plan is invalid and was rejected. You must fix the plan and resubmit.",
    details,
  });
}

function changeNoteOf(actor: string, added: number, edited: number): string {
  const parts = [
    ...(added > 0 ? [`added ${added} task${added === 1 ? "" : "s"}`] : []),
    ...(edited > 0 ? [`edited ${edited} task${edited === 1 ? "" : "s"}`] : []),
  ];
  return `${actor} ${parts.join(" and ")}`;
}

/**
 * The tasks `update_tasks` changes beyond their status, checked by the gates an added task passes.
 * A task whose definition a person approved (the run's approved version, by a person) waits for a
 * new approval once edited: an approval covers exactly what it was given.
 */
async function checkTaskEdits(
  app: App,
  session: SessionRow,
  loaded: Loaded,
  payload: UpdatePayload,
  addedCount: number,
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
    fileExists: (relativePath) => existsIn(session.workspace_root, relativePath),
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

/** A task's acceptance criteria and verifier commands, as the agent sees them. */
function taskChecksView(step: Step): Pick<AgentTaskView, "acceptance" | "verify"> {
  if (step.tool !== AGENT_TASK_TOOL) return {};
  const args = step.args as { acceptance?: string[] };
  const verify = verifierCommands(step.args);
  return {
    ...(args.acceptance?.length && { acceptance: args.acceptance }),
    ...(verify.length > 0 && { verify }),
  };
}

/**
 * The task a status hands out gets its working directory (its worktree, made now from the
 * integration branch: its dependencies are DONE, so merged) and the findings of its last failed
 * verification.
 */
async function briefCurrentTask(
  pool: App["db"]["pool"],
  session: SessionRow,
  response: StatusResponse,
): Promise<StatusResponse> {
  if (!("current_task" in response.now)) return response;
  const task = response.now.current_task;
  if (task.executor !== "agent") return response;
  const stepId = `step_${task.id}`;
  const working_directory = await taskWorkingDirectory({
    workspaceRoot: session.workspace_root,
    runId: session.run_id,
    stepId,
  });
  const last = (await latestVerifications(pool, session.run_id)).get(stepId);
  const findings = last && !last.passed ? findingsNote(last.results) : undefined;
  return {
    ...response,
    now: { ...response.now, current_task: { ...task, working_directory, ...(findings && { findings }) } },
  } as StatusResponse;
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

async function existsIn(root: string, relativePath: string): Promise<boolean> {
  try {
    await fs.stat(await resolveInWorkspace(root, relativePath.replace(/\/+$/, "") || "."));
    return true;
  } catch {
    return false;
  }
}

async function audit(app: App, session: SessionRow, actor: string, action: AuditAction, detail: object): Promise<void> {
  await recordAudit(app.db.pool, {
    actor,
    action,
    planId: session.plan_id,
    runId: session.run_id,
    detail: { sessionId: session.id, ...detail },
  });
}

/** Signals are not step states, but the live view shows them: they travel in the run's stream. */
async function appendRunEvent(app: App, session: SessionRow, event: NewEvent): Promise<void> {
  await inTransaction(app.db.pool, async (client) => {
    const run = await client.query<{ trace_id: string }>("select trace_id from runs where id = $1", [session.run_id]);
    await appendEvents(
      client,
      { streamId: session.run_id, planId: session.plan_id, runId: session.run_id, traceId: run.rows[0]!.trace_id },
      [event],
    );
  });
}

export type AlertInput = { id: string; level: SignalLevel; message: string; task_id?: number } | { clear: string };

/**
 * Seed 003's `alert`: raises a signal (a blocker pauses the session's run) or clears one. Clearing
 * the signal of a failed step tries that step again; clearing the last blocker resumes the run.
 */
export async function alertSession(
  app: App,
  input: { sessionId?: string; alert: AlertInput; actor: string },
): Promise<{ status: "success"; message: string }> {
  const session = await findSession(app, input.sessionId, input.actor);
  await seen(app, session, input.actor);
  const { alert } = input;
  if ("clear" in alert) return clearSignal(app, session, alert.clear, input.actor);
  if (alert.task_id !== undefined) {
    const loaded = await loadSession(app, session);
    if (!loaded.steps.some((step) => step.id === `step_${alert.task_id}`)) {
      throw new AppError("not_found", `There is no task ${alert.task_id} in this plan`);
    }
  }
  const isNew = await upsertSignal(app.db.pool, {
    sessionId: session.id,
    key: alert.id,
    taskId: alert.task_id ?? null,
    level: alert.level,
    message: alert.message,
    raisedBy: input.actor,
  });
  await audit(app, session, input.actor, "signal.raised", {
    signal: alert.id,
    level: alert.level,
    message: alert.message,
  });
  await appendRunEvent(app, session, {
    type: "signal.raised",
    stepId: alert.task_id ? `step_${alert.task_id}` : null,
    data: { id: alert.id, level: alert.level, message: alert.message, raisedBy: input.actor },
  });
  if (alert.level === "blocker") {
    await pauseRunForSignal(app.engine, { runId: session.run_id, reason: `Blocked by signal '${alert.id}'` });
  }
  return { status: "success", message: `Signal '${alert.id}' ${isNew ? "raised" : "updated"}.` };
}

export async function clearSignal(
  app: App,
  session: SessionRow,
  key: string,
  actor: string,
): Promise<{ status: "success"; message: string }> {
  const cleared = await inTransaction(app.db.pool, async (client) => {
    const rows = await client.query<{ task_id: number | null; raised_by: string }>(
      `update signals set cleared_by = $3, cleared_at = now()
       where session_id = $1 and key = $2 and cleared_at is null returning task_id, raised_by`,
      [session.id, key, actor],
    );
    return rows.rows[0];
  });
  if (!cleared) throw new AppError("not_found", `No open signal '${key}' in session ${session.id}`);
  await audit(app, session, actor, "signal.cleared", { signal: key });
  await appendRunEvent(app, session, {
    type: "signal.cleared",
    stepId: cleared.task_id === null ? null : `step_${cleared.task_id}`,
    data: { id: key, clearedBy: actor },
  });
  // A failure signal: the step that failed runs again now that the cause is fixed.
  let retried = "";
  if (cleared.raised_by === "stepwise" && cleared.task_id !== null) {
    const stepId = `step_${cleared.task_id}`;
    const status = await app.db.pool.query<{ status: StepStatus; tool: string }>(
      "select status, tool from run_steps where run_id = $1 and step_id = $2",
      [session.run_id, stepId],
    );
    const failed = status.rows[0];
    // Trying a failed step again is a person's decision, except for the agent's own task and a
    // step whose tool only reads (a check the agent's fix should now pass).
    const harmless = failed !== undefined && (failed.tool === AGENT_TASK_TOOL || app.tools.get(failed.tool)?.readOnly);
    if (failed?.status === "failed" && (actorKindOf(actor) === "person" || harmless)) {
      await retryStep(app.engine, { runId: session.run_id, stepId, actor });
      retried = ` Task ${cleared.task_id} runs again.`;
    } else if (failed?.status === "failed") {
      retried = ` Task ${cleared.task_id} stays failed until a person retries it.`;
    }
  }
  const blockers = await app.db.pool.query(
    "select 1 from signals where session_id = $1 and level = 'blocker' and cleared_at is null limit 1",
    [session.id],
  );
  if (blockers.rowCount === 0) await resumeRunAfterSignal(app.engine, { runId: session.run_id, actor });
  return { status: "success", message: `Signal '${key}' cleared.${retried}` };
}

/** Sessions for the browser's list, newest first. */
export async function listSessions(app: App, options: { limit?: number } = {}) {
  const rows = await app.db.pool.query<SessionRow & { open_signals: number; run_status: string }>(
    `select s.*, r.status as run_status,
       (select count(*)::int from signals g where g.session_id = s.id and g.cleared_at is null) as open_signals
     from agent_sessions s join runs r on r.id = s.run_id
     order by s.created_at desc limit $1`,
    [Math.min(options.limit ?? 50, 200)],
  );
  return rows.rows.map((row) => ({
    id: row.id,
    goal: row.goal,
    planId: row.plan_id,
    runId: row.run_id,
    runStatus: row.run_status,
    openSignals: row.open_signals,
    createdAt: row.created_at.toISOString(),
    closed: row.closed_at !== null,
    lastSeenAt: row.last_seen_at?.toISOString() ?? null,
  }));
}

/** The session a run belongs to, with its open signals, for the run's live view. */
export async function sessionOfRun(app: App, runId: string) {
  const rows = await app.db.pool.query<SessionRow & { idle_seconds: number }>(
    // Idle since the agent's last call, or since the session began when it never called: by the
    // database's clock, like every other wait.
    `select *, extract(epoch from now() - coalesce(last_seen_at, created_at))::int as idle_seconds
     from agent_sessions where run_id = $1`,
    [runId],
  );
  const session = rows.rows[0];
  if (!session) return null;
  return {
    id: session.id,
    goal: session.goal,
    agent: session.created_by,
    workspaceRoot: session.workspace_root,
    finalSummary: session.final_summary,
    closed: session.closed_at !== null,
    lastSeenAt: session.last_seen_at?.toISOString() ?? null,
    idleSeconds: session.idle_seconds,
    fromPlanMode: session.planning_session_id !== null,
    signals: await openSignals(app.db.pool, session.id),
    agentConcurrency: session.agent_concurrency,
    leaseSeconds: session.lease_seconds,
    agents: await agentsOfSession(app, session.id),
    // Each agent task's last verification (server/agents/verifiers.ts), for the run page.
    verifications: [...(await latestVerifications(app.db.pool, runId)).entries()].map(([stepId, check]) => ({
      stepId,
      taskId: taskNumber(stepId),
      ...check,
    })),
  };
}

export interface TaskSuggestion {
  title: string;
  type: string;
  context_hints: string[];
  relevant_file_paths: string[];
  reason: string;
}

/**
 * Seed 003's `suggest` (P-3): new tasks for the session from the workspace — the TODO/FIXME
 * markers in its files, and, with an LLM provider configured, the planner's suggestions. Nothing
 * is added; the agent adds the ones worth doing with `add_tasks`. Titles already in the plan are
 * left out.
 */
export async function suggestForSession(
  app: App,
  input: { sessionId?: string; caller?: string; suggestWithModel?: (planId: string) => Promise<TaskSuggestion[]> },
): Promise<{ status: "success"; suggestions: TaskSuggestion[] }> {
  const session = await findSession(app, input.sessionId, input.caller);
  const loaded = await loadSession(app, session);
  const { findTodoMarkers } = await import("../planner/snapshot");
  const markers = await findTodoMarkers(session.workspace_root, 20);
  const fromMarkers: TaskSuggestion[] = markers.map((marker) => ({
    title: `Resolve the ${marker.kind} in ${marker.path}:${marker.line}: ${marker.text}`.slice(0, 200),
    type: marker.kind === "FIXME" || marker.kind === "BUG" ? "bugfix" : "chore",
    context_hints: [`Read \`${marker.path}\` around line ${marker.line}, where the ${marker.kind} marker is.`],
    relevant_file_paths: [marker.path],
    reason: `${marker.kind} marker in ${marker.path}:${marker.line}`,
  }));
  const fromModel = input.suggestWithModel ? await input.suggestWithModel(session.plan_id) : [];
  const known = new Set(loaded.steps.map((step) => normaliseTitle(step.title ?? step.description)));
  const suggestions: TaskSuggestion[] = [];
  for (const suggestion of [...fromModel, ...fromMarkers]) {
    const key = normaliseTitle(suggestion.title);
    if (known.has(key)) continue;
    known.add(key);
    suggestions.push(suggestion);
  }
  return { status: "success", suggestions };
}

function normaliseTitle(title: string): string {
  return title
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, " ")
    .trim();
}

/**
 * A person's edit of a session's plan in the browser: the session's run adopts the new version at
 * once, so the live view shows the change without waiting for the agent's next call. Plans that
 * are not a session's are left alone; a version that cannot be adopted stays for the agent's next
 * call to report.
 */
export async function adoptIntoSessionRun(app: App, planId: string, version: number, actor: string): Promise<void> {
  const session = await app.db.pool.query<{ run_id: string }>(
    "select run_id from agent_sessions where plan_id = $1 and closed_at is null",
    [planId],
  );
  const runId = session.rows[0]?.run_id;
  if (!runId) return;
  await adoptPlanVersionIntoRun(app.engine, { runId, version, actor }).catch((error: unknown) => {
    if (!(error instanceof AppError)) throw error;
  });
}
