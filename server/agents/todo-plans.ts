import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { AppContext } from "../services";
import { adoptPlanVersionIntoRun, cancelRun, updateAgentTasks, type AgentTaskStatus } from "../engine/engine";
import { rerunFrom } from "../engine/recovery";
import { recordAudit } from "../audit/audit-log";
import { AppError } from "../errors";
import type { Step, StepInput, StepStatus } from "../plan-schema";
import { getPlan } from "../plans/service";
import { savePlanVersion } from "../plans/versions";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { startSession } from "./sessions";
import { taskNumber } from "../engine/agent-signals";
import { FINISHED_RUN_STATUSES, isIn } from "../vocabulary";

/**
 * Seed 000's planning tools: one session-scoped todo list per MCP session — an objective and
 * ordered steps that are pending, in_progress or done. Each list is a real Stepwise plan of agent
 * tasks with a run, so people watch it live in the browser like any other; the seed's view is
 * derived from the run's step states. Step ids are step numbers (1, 2, 3 …, never reused).
 */
type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

export const TODO_STEP_STATUSES = ["pending", "in_progress", "done"] as const;
type TodoStepStatus = (typeof TODO_STEP_STATUSES)[number];

const title = z.string().trim().min(1, "Titles must be non-empty").max(500, "Titles must be at most 500 characters");

export const setupPlanInput = z.object({
  objective: z.string().trim().min(1, "The objective must be non-empty").max(4_000),
  initial_steps: z.array(title).max(200).default([]),
});
export const addStepInput = z.object({ steps: z.array(title).min(1, "Give at least one step").max(200) });
export const updateStepInput = z
  .object({
    step_id: z.number().int().positive(),
    title: title.optional(),
    status: z.enum(TODO_STEP_STATUSES).optional(),
  })
  .refine((input) => input.title !== undefined || input.status !== undefined, {
    message: "Give at least one of title or status",
  });

export const todoPlanSchema = z.object({
  objective: z.string(),
  status: z.enum(["active", "completed"]),
  steps: z.array(z.object({ step_id: z.number().int(), title: z.string(), status: z.enum(TODO_STEP_STATUSES) })),
  /** Addition: where people watch this plan. */
  plan_id: z.string(),
  run_id: z.string(),
});
export type TodoPlan = z.infer<typeof todoPlanSchema>;

/** A seed 000 title as a step: the whole title is the description; the short title fits the step's 200. */
function todoStep(number: number, text: string): StepInput {
  return {
    id: `step_${number}`,
    title: text.length > 200 ? `${text.slice(0, 199)}…` : text,
    description: text,
    tool: AGENT_TASK_TOOL,
    type: "chore",
  };
}

interface TodoSession {
  id: string;
  goal: string;
  plan_id: string;
  run_id: string;
}

/**
 * Whose todo plans these are: the agent's name, and the named credential that proved it (none for
 * the shared agent token), so another credential using the same name reaches none of them.
 */
export function todoOwnerPrefix(caller: { name: string; tokenId?: string }): string {
  return `mcp:${caller.name}${caller.tokenId ? `~${caller.tokenId}` : ""}:`;
}

/** The todo plan of one MCP session (or client-given id): its caller and that id, so nobody else's plan is reached. */
export function todoKeyFor(caller: { name: string; tokenId?: string }, mcpSessionId: string): string {
  return `${todoOwnerPrefix(caller)}${mcpSessionId}`;
}

/**
 * The MCP session ended (the client closed it, or it expired): its todo plan ends with it. A run
 * still open is cancelled as abandoned (audited), and the plan's session is closed, so nothing is
 * left running for ever and the workspace can be removed.
 */
export async function abandonTodoPlan(app: App, key: string, why: string): Promise<boolean> {
  const rows = await app.db.pool.query<TodoSession & { run_status: string }>(
    `select s.id, s.goal, s.plan_id, s.run_id, r.status as run_status
     from agent_sessions s join runs r on r.id = s.run_id where s.todo_key = $1 and s.closed_at is null`,
    [key],
  );
  const todo = rows.rows[0];
  if (!todo) return false;
  let cancelled = false;
  if (!isIn(FINISHED_RUN_STATUSES, todo.run_status)) {
    try {
      await cancelRun(app.engine, { runId: todo.run_id, actor: "stepwise" });
      cancelled = true;
    } catch (error) {
      // Finished in the same instant: nothing to abandon.
      if (!(error instanceof AppError)) throw error;
    }
  }
  await app.db.pool.query("update agent_sessions set closed_at = coalesce(closed_at, now()) where id = $1", [todo.id]);
  await recordAudit(app.db.pool, {
    actor: "stepwise",
    action: "todo.abandoned",
    planId: todo.plan_id,
    runId: todo.run_id,
    detail: { sessionId: todo.id, reason: why, runCancelled: cancelled },
  });
  return true;
}

async function findTodo(app: App, key: string): Promise<TodoSession> {
  const rows = await app.db.pool.query<TodoSession>(
    "select id, goal, plan_id, run_id from agent_sessions where todo_key = $1",
    [key],
  );
  if (!rows.rows[0])
    throw new AppError("not_found", "No plan exists in this session: create one with planning_setup_plan");
  return rows.rows[0];
}

/** Creates the session's plan, replacing (and cancelling) any earlier one. */
export async function setupPlan(
  app: App,
  input: {
    key: string;
    actor: string;
    /** The MCP connection the key is of, when the client named no key of its own (server/agents/todo-durability.ts). */
    mcpSession?: string;
  } & z.output<typeof setupPlanInput>,
): Promise<TodoPlan> {
  const previous = await app.db.pool.query<TodoSession & { status: string }>(
    `select s.id, s.run_id, r.status from agent_sessions s join runs r on r.id = s.run_id where s.todo_key = $1`,
    [input.key],
  );
  const old = previous.rows[0];
  if (old) {
    if (!isIn(FINISHED_RUN_STATUSES, old.status)) {
      await cancelRun(app.engine, { runId: old.run_id, actor: input.actor });
    }
    // The old plan stays in the history; the key moves to the new one.
    await app.db.pool.query(
      "update agent_sessions set todo_key = $2, closed_at = coalesce(closed_at, now()) where id = $1",
      [old.id, `replaced:${randomUUID()}`],
    );
  }
  await startSession(app, {
    goal: input.objective,
    actor: input.actor,
    todoKey: input.key,
    steps: input.initial_steps.map((text, index) => todoStep(index + 1, text)),
  });
  if (input.mcpSession) {
    await app.db.pool.query(
      "update agent_sessions set todo_mcp_session = $2, last_seen_at = now() where todo_key = $1",
      [input.key, input.mcpSession],
    );
  }
  return readPlan(app, input.key);
}

export async function addSteps(
  app: App,
  input: { key: string; actor: string } & z.output<typeof addStepInput>,
): Promise<TodoPlan> {
  const todo = await findTodo(app, input.key);
  const current = await readPlan(app, input.key);
  if (current.status === "completed") throw new AppError("invalid_state", "The plan is completed; set up a new one");
  const row = await app.db.prisma.plan.findUniqueOrThrow({ where: { id: todo.plan_id } });
  const plan = await getPlan(app.db.prisma, todo.plan_id);
  const saved = await savePlanVersion(app.db.prisma, app.tools, {
    planId: plan.id,
    baseVersion: plan.version,
    draft: {
      ...plan,
      steps: [...plan.steps, ...input.steps.map((text, index) => todoStep(row.lastStepNumber + 1 + index, text))],
    },
    source: "agent",
    author: input.actor,
    checklist: true,
    changeNote: `${input.actor} added ${input.steps.length} step${input.steps.length === 1 ? "" : "s"}`,
  });
  await adoptPlanVersionIntoRun(app.engine, { runId: todo.run_id, version: saved.version, actor: input.actor });
  return readPlan(app, input.key);
}

const STATUS_UPDATE: Record<TodoStepStatus, AgentTaskStatus> = {
  pending: "TODO",
  in_progress: "IN_PROGRESS",
  done: "DONE",
};

export async function updateStep(
  app: App,
  input: { key: string; actor: string } & z.output<typeof updateStepInput>,
): Promise<TodoPlan> {
  const todo = await findTodo(app, input.key);
  const plan = await getPlan(app.db.prisma, todo.plan_id);
  const stepId = `step_${input.step_id}`;
  const step = plan.steps.find((candidate) => candidate.id === stepId);
  if (!step) throw new AppError("not_found", `The plan has no step ${input.step_id}`);
  let adoptVersion: number | undefined;
  if (input.title !== undefined && input.title !== step.description) {
    const renamed = todoStep(input.step_id, input.title);
    const saved = await savePlanVersion(app.db.prisma, app.tools, {
      planId: plan.id,
      baseVersion: plan.version,
      draft: {
        ...plan,
        steps: plan.steps.map((candidate) =>
          candidate.id === stepId
            ? { ...candidate, title: renamed.title, description: renamed.description }
            : candidate,
        ),
      },
      source: "agent",
      author: input.actor,
      checklist: true,
      changeNote: `${input.actor} renamed step ${input.step_id}`,
    });
    adoptVersion = saved.version;
  }
  const current = await app.db.pool.query<{ status: StepStatus }>(
    "select status from run_steps where run_id = $1 and step_id = $2",
    [todo.run_id, stepId],
  );
  if (input.status && input.status !== "done" && current.rows[0]?.status === "completed") {
    if (adoptVersion !== undefined) {
      await updateAgentTasks(app.engine, { runId: todo.run_id, updates: [], actor: input.actor, adoptVersion });
    }
    await reopenStep(app, todo, { stepId, status: input.status, actor: input.actor });
    return readPlan(app, input.key);
  }
  const updates = input.status ? [{ stepId, status: STATUS_UPDATE[input.status] }] : [];
  await updateAgentTasks(app.engine, { runId: todo.run_id, updates, actor: input.actor, adoptVersion });
  return readPlan(app, input.key);
}

/**
 * Seed 000 has no terminal step state: a done step may be set back to pending or in progress. A
 * run never un-completes a step (its result is recorded), so the plan continues in a new run of
 * the same plan — the engine's re-run, which keeps every other done step's result and runs this
 * one again — and the todo list follows it. Steps in progress stay in progress.
 */
async function reopenStep(
  app: App,
  todo: TodoSession,
  input: { stepId: string; status: "pending" | "in_progress"; actor: string },
): Promise<void> {
  const before = await app.db.pool.query<{ step_id: string; status: StepStatus; run_status: string }>(
    "select s.step_id, s.status, r.status as run_status from run_steps s join runs r on r.id = s.run_id where s.run_id = $1",
    [todo.run_id],
  );
  const inProgress = before.rows.filter((row) => row.status === "running").map((row) => row.step_id);
  if (!isIn(FINISHED_RUN_STATUSES, before.rows[0]?.run_status ?? "completed")) {
    await cancelRun(app.engine, { runId: todo.run_id, actor: input.actor });
  }
  const { runId } = await rerunFrom(app.engine, app.db.prisma, {
    runId: todo.run_id,
    stepId: input.stepId,
    actor: input.actor,
  });
  await app.db.pool.query("update agent_sessions set run_id = $2 where id = $1", [todo.id, runId]);
  const resumed = input.status === "in_progress" ? [...inProgress, input.stepId] : inProgress;
  if (resumed.length > 0) {
    await updateAgentTasks(app.engine, {
      runId,
      updates: resumed.map((stepId) => ({ stepId, status: "IN_PROGRESS" as const })),
      actor: input.actor,
    });
  }
  await recordAudit(app.db.pool, {
    actor: input.actor,
    action: "todo.reopened",
    planId: todo.plan_id,
    runId,
    stepId: input.stepId,
    detail: { sessionId: todo.id, previousRunId: todo.run_id, status: input.status },
  });
}

const TODO_STATUS: Partial<Record<StepStatus, TodoStepStatus>> = { running: "in_progress", completed: "done" };

export async function readPlan(app: App, key: string): Promise<TodoPlan> {
  const todo = await findTodo(app, key);
  const [run, steps] = await Promise.all([
    app.db.pool.query<{ plan_version: number; status: string }>("select plan_version, status from runs where id = $1", [
      todo.run_id,
    ]),
    app.db.pool.query<{ step_id: string; status: StepStatus }>(
      "select step_id, status from run_steps where run_id = $1",
      [todo.run_id],
    ),
  ]);
  const version = await app.db.pool.query<{ steps: Step[] }>(
    "select steps from plan_versions where plan_id = $1 and version = $2",
    [todo.plan_id, run.rows[0]!.plan_version],
  );
  const statuses = new Map(steps.rows.map((row) => [row.step_id, row.status]));
  const view = version.rows[0]!.steps.map((step) => ({
    step_id: taskNumber(step.id) ?? 0,
    title: step.description || step.title || "",
    status: TODO_STATUS[statuses.get(step.id) ?? "pending"] ?? ("pending" as const),
  }));
  const completed = view.length > 0 && view.every((step) => step.status === "done");
  return {
    objective: todo.goal,
    status: completed ? "completed" : "active",
    steps: view,
    plan_id: todo.plan_id,
    run_id: todo.run_id,
  };
}
