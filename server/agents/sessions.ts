import type { AppContext } from "../services";
import { adoptPlanVersionIntoRun, startRun } from "../engine/engine";
import { AppError } from "../errors";
import type { StepInput } from "../plan-schema";
import { createPlan } from "../plans/service";
import { workspaceForNewWork } from "../plans/workspaces";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { taskNumber } from "../engine/agent-signals";
import { agentsOfSession } from "./session-agents";
import { openSignals } from "./signal-store";
import { isAuthorRefusal, pendingSessionStatus, requestSession } from "./session-requests";
import { insertSession } from "./session-rows";
import { latestVerifications, removeWorktreesOfFinishedRuns } from "./task-integration";

/**
 * Agent sessions (seed 003): a goal, a plan whose steps are the agent's tasks (and any tool steps
 * a person adds, such as the tests after a code task), the run that executes it, and signals.
 * The engine owns step states; the agent's calls translate between the seed's contract and the
 * engine: `status` in session-status.ts, `update` in session-updates.ts, `alert` in
 * session-signals.ts, `suggest` in session-suggestions.ts, over the state session-state.ts reads.
 * This module holds the sessions themselves: starting, naming, finding and listing them.
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
  /** Attached from an agent's own plan (plan_create): only that author, under this credential, works it. */
  author_bound: boolean;
  author_credential: string | null;
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
        // Another agent's own plan is not the caller's to be handed when it names no session.
        `select * from agent_sessions where todo_key is null and (not author_bound or created_by = $1)
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
