import type pg from "pg";
import type { AppContext } from "../services";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { returnExpiredAgentTask } from "../engine/agent-leases";
import { appendEvents } from "../events/store";
import type { Step, StepStatus } from "../plan-schema";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import type { ApproverNote, TaskBrief } from "./contract";
import { taskNumber } from "../engine/agent-signals";
import { plannedWorkingDirectory } from "./task-working-directory";
import { workspaceRepository } from "./worktrees";
import { taskRefOf } from "./task-ref";
import { workspacePlace } from "./workspace-calls";
import { handOutWorkingDirectory, plannedRemoteWorkingDirectory } from "./workspace-work";

/**
 * Several agents, one plan: the hand-out of a session's agent tasks under leases.
 *
 * `status` gives each agent (by the name it calls with) a different ready task and records a
 * lease — assignee and expiry by the database's clock — with the task's brief as given. Every call
 * of that agent on the session renews its leases; a lease that runs out returns the task to the
 * ready tasks (checked at every call on the session and by the worker's sweep). At most
 * `agent_concurrency` tasks are leased at once. Hand-outs of one session are serialised by a
 * transaction-scoped advisory lock, so two agents asking at the same moment never get one task.
 * The step's state stays the engine's: a handed-out task is awaiting_agent until its agent says
 * IN_PROGRESS, exactly as with a single agent. What an agent's `update` does to leases is in
 * lease-updates.ts; the session's agents as people see them, and their cap, in session-agents.ts.
 */
type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

export interface LeaseSession {
  id: string;
  goal: string;
  run_id: string;
  plan_id: string;
  workspace_root: string;
}

export interface LeaseRow {
  step_id: string;
  agent: string;
  leased_at: Date;
  expires_at: Date;
  brief: TaskBrief;
}

export const DEFAULT_AGENT_CONCURRENCY = 3;
export const MAX_AGENT_CONCURRENCY = 64;

/** Hand-outs and lease changes of one session, one at a time (released at commit). */
async function lockSession(client: pg.PoolClient, sessionId: string): Promise<void> {
  await client.query("select pg_advisory_xact_lock(hashtextextended('agent-handout:' || $1, 0))", [sessionId]);
}

export function withSessionLock<T>(
  app: Pick<App, "db">,
  sessionId: string,
  work: (client: pg.PoolClient) => Promise<T>,
) {
  return inTransaction(app.db.pool, async (client) => {
    await lockSession(client, sessionId);
    return work(client);
  });
}

/**
 * An agent called on the session: it is seen now, and every lease it holds runs for another
 * lease period from now. Expired leases are not revived — their tasks may already be another's.
 * A person's calls (planning in the browser, trying a command) renew their leases but do not list
 * them among the session's agents.
 */
export async function noteAgentCall(
  app: Pick<App, "db">,
  sessionId: string,
  agent: string,
  options: { listed: boolean },
): Promise<void> {
  if (!options.listed) {
    await app.db.pool.query(
      `update agent_task_leases l set expires_at = clock_timestamp() + make_interval(secs => s.lease_seconds)
         from agent_sessions s
        where s.id = l.session_id and l.session_id = $1 and l.agent = $2 and l.expires_at > clock_timestamp()`,
      [sessionId, agent],
    );
    return;
  }
  await app.db.pool.query(
    `with renewed as (
       update agent_task_leases l set expires_at = clock_timestamp() + make_interval(secs => s.lease_seconds)
         from agent_sessions s
        where s.id = l.session_id and l.session_id = $1 and l.agent = $2 and l.expires_at > clock_timestamp()
       returning 1)
     insert into session_agents (session_id, agent, first_seen_at, last_seen_at)
     values ($1, $2, clock_timestamp(), clock_timestamp())
     on conflict (session_id, agent) do update set last_seen_at = excluded.last_seen_at`,
    [sessionId, agent],
  );
}

/** Returns the tasks of leases that ran out to the ready tasks, in the caller's locked transaction. */
async function expireIn(app: App, client: pg.PoolClient, session: LeaseSession): Promise<number> {
  // A task reported DONE keeps its lease while it is merged: it is not anyone else's to redo.
  const expired = await client.query<{ step_id: string; agent: string; leased_at: Date }>(
    `delete from agent_task_leases l where l.session_id = $1 and l.expires_at <= clock_timestamp()
        and not exists (select 1 from agent_task_reports r where r.session_id = l.session_id and r.step_id = l.step_id)
     returning l.step_id, l.agent, l.leased_at`,
    [session.id],
  );
  for (const lease of expired.rows) {
    await returnExpiredAgentTask(app.engine, client, {
      runId: session.run_id,
      stepId: lease.step_id,
      agent: lease.agent,
      leasedAt: lease.leased_at.toISOString(),
    });
  }
  return expired.rowCount ?? 0;
}

/**
 * The server's own enforcement of leases, for sessions no agent calls on any more: every open
 * session with an expired lease gets its tasks back. The worker runs it periodically.
 */
export async function sweepExpiredLeases(app: App): Promise<number> {
  const due = await app.db.pool.query<LeaseSession>(
    `select distinct s.id, s.goal, s.run_id, s.plan_id, s.workspace_root
       from agent_task_leases l join agent_sessions s on s.id = l.session_id
      where l.expires_at <= clock_timestamp()
        and not exists (select 1 from agent_task_reports r where r.session_id = l.session_id and r.step_id = l.step_id)`,
  );
  let count = 0;
  for (const session of due.rows) {
    count += await withSessionLock(app, session.id, (client) => expireIn(app, client, session));
  }
  return count;
}

export type HandOut =
  | { kind: "task"; stepId: string; brief: TaskBrief; leases: LeaseRow[]; workingDirectory?: string }
  | { kind: "none"; capReached: boolean; cap: number; leases: LeaseRow[] };

const WORKABLE: ReadonlySet<StepStatus> = new Set(["awaiting_agent", "running"]);

/**
 * SQL over `run_steps r`, `$2` the session: the step has a reported DONE being integrated
 * (task-reports.ts). Read with the steps' states, in the same query.
 */
export const REPORTED_SQL =
  "exists (select 1 from agent_task_reports t where t.session_id = $2 and t.step_id = r.step_id)";

/** The steps of a run reported DONE and not yet settled, with who reported each (for `run.get`; task-reports.ts). */
export async function reportedTasks(pool: pg.Pool, runId: string): Promise<Map<string, string>> {
  const rows = await pool.query<{ step_id: string; actor: string }>(
    "select step_id, actor from agent_task_reports where run_id = $1",
    [runId],
  );
  return new Map(rows.rows.map((row) => [row.step_id, row.actor]));
}
/**
 * Which task is this agent's now: the one it already holds (its lease renewed), else a task in
 * progress that nobody holds (an agent's from before leases, or a person's), else — when fewer
 * than the cap are held and new work may start — the first ready task in plan order that no other
 * agent holds, leased to it now. Expired leases are returned first, so their tasks are available.
 */
export async function handOutTask(
  app: App,
  session: LeaseSession,
  agent: string,
  plan: { steps: Step[]; approverNotes: ApproverNote[]; mayStartNew: boolean },
): Promise<HandOut> {
  // Git runs before and after the session's transaction, never inside it (see plannedWorkingDirectory),
  // and on a machine serving the workspace (workspace-calls.ts): here, or a worker's. When none
  // serves it, the agent is told so before anything changed.
  const place = await workspacePlace(app, session.workspace_root);
  const repo = place === "here" ? await workspaceRepository(session.workspace_root) : undefined;
  const handOut = await withSessionLock(app, session.id, async (client): Promise<HandOut> => {
    await expireIn(app, client, session);
    // One client runs one query at a time: these go one after another.
    const settings = await client.query<{ agent_concurrency: number; lease_seconds: number }>(
      "select agent_concurrency, lease_seconds from agent_sessions where id = $1",
      [session.id],
    );
    const statusRows = await client.query<{ step_id: string; status: StepStatus; reported: boolean }>(
      `select r.step_id, r.status, ${REPORTED_SQL} as reported from run_steps r where r.run_id = $1`,
      [session.run_id, session.id],
    );
    const leaseRows = await client.query<LeaseRow>(
      "select step_id, agent, leased_at, expires_at, brief from agent_task_leases where session_id = $1",
      [session.id],
    );
    const { agent_concurrency: cap, lease_seconds: leaseSeconds } = settings.rows[0]!;
    // A task reported DONE and being merged (task-reports.ts) is nobody's to take or carry on, and
    // does not count against the cap: its agent is free for the next one.
    const reported = new Set(statusRows.rows.filter((row) => row.reported).map((row) => row.step_id));
    const statuses = new Map(statusRows.rows.map((row) => [row.step_id, row.status]));
    // A lease on a task that is no longer workable (done, skipped by a person) is over.
    const stale = leaseRows.rows.filter((lease) => !WORKABLE.has(statuses.get(lease.step_id) ?? "pending"));
    if (stale.length > 0) {
      await client.query("delete from agent_task_leases where session_id = $1 and step_id = any($2)", [
        session.id,
        stale.map((lease) => lease.step_id),
      ]);
    }
    const leases = leaseRows.rows.filter((lease) => !stale.includes(lease));
    const working = leases.filter((lease) => !reported.has(lease.step_id));
    const leased = new Map(leases.map((lease) => [lease.step_id, lease]));
    // A fan-out task's group is not handed out; each of its instances is (session-state.ts lists them).
    const agentSteps = plan.steps.filter((step) => step.tool === AGENT_TASK_TOOL && step.forEach === undefined);

    const mine = agentSteps
      .map((step) => leased.get(step.id))
      .find((lease) => lease?.agent === agent && !reported.has(lease.step_id));
    if (mine) {
      return {
        kind: "task",
        stepId: mine.step_id,
        brief: { ...mine.brief, lease_expires_at: mine.expires_at.toISOString() },
        leases,
      };
    }
    const free = (step: Step) => !leased.has(step.id) && !reported.has(step.id);
    const unheldRunning = agentSteps.filter((step) => statuses.get(step.id) === "running" && free(step));
    const ready = agentSteps.find((step) => statuses.get(step.id) === "awaiting_agent" && free(step));
    const capReached = working.length + unheldRunning.length >= cap;
    const chosen = unheldRunning[0] ?? (plan.mayStartNew && !capReached ? ready : undefined);
    if (!chosen) return { kind: "none", capReached: capReached && ready !== undefined, cap, leases };

    const workingDirectory =
      place === "here"
        ? plannedWorkingDirectory(repo, {
            workspaceRoot: session.workspace_root,
            runId: session.run_id,
            stepId: chosen.id,
          })
        : plannedRemoteWorkingDirectory(session, chosen.id);
    const lease = await leaseTo(app, client, session, agent, chosen, { ...plan, leaseSeconds, workingDirectory });
    return { kind: "task", stepId: chosen.id, brief: lease.brief, leases: [...leases, lease] };
  });
  // Made (idempotently; usually ahead, see worktrees-ahead.ts) before the agent hears of it: the hand-out names it.
  if (handOut.kind !== "task") return handOut;
  const step = plan.steps.find((candidate) => candidate.id === handOut.stepId);
  if (!step) return { ...handOut, workingDirectory: session.workspace_root };
  const workingDirectory = await handOutWorkingDirectory(app, place, session, step, { repo });
  if (place === "here" || handOut.brief.working_directory === workingDirectory) return { ...handOut, workingDirectory };
  // Named before a worker made it (no worktree there, or its folder spelled otherwise): the
  // lease's brief says where the task really is.
  await app.db.pool.query(
    `update agent_task_leases set brief = jsonb_set(brief, '{working_directory}', to_jsonb($3::text))
      where session_id = $1 and step_id = $2`,
    [session.id, step.id, workingDirectory],
  );
  return { ...handOut, workingDirectory, brief: { ...handOut.brief, working_directory: workingDirectory } };
}

/** Records the lease and its brief; the run's stream and the audit log say who got which task. */
export async function leaseTo(
  app: App,
  client: pg.PoolClient,
  session: LeaseSession,
  agent: string,
  step: Step,
  plan: { steps: Step[]; approverNotes: ApproverNote[]; leaseSeconds: number; workingDirectory: string },
): Promise<LeaseRow> {
  const times = await client.query<{ leased_at: Date; expires_at: Date }>(
    "select clock_timestamp() as leased_at, clock_timestamp() + make_interval(secs => $1) as expires_at",
    [plan.leaseSeconds],
  );
  const { leased_at: leasedAt, expires_at: expiresAt } = times.rows[0]!;
  const brief = await buildBrief(client, session, step, agent, expiresAt, plan);
  await client.query(
    `insert into agent_task_leases (session_id, step_id, run_id, agent, leased_at, expires_at, brief)
     values ($1, $2, $3, $4, $5, $6, $7)`,
    [session.id, step.id, session.run_id, agent, leasedAt, expiresAt, JSON.stringify(brief)],
  );
  const run = await client.query<{ trace_id: string; plan_version: number }>(
    "select trace_id, plan_version from runs where id = $1",
    [session.run_id],
  );
  await appendEvents(
    client,
    { streamId: session.run_id, planId: session.plan_id, runId: session.run_id, traceId: run.rows[0]!.trace_id },
    [{ type: "agent.task_leased", stepId: step.id, data: { agent, expiresAt: expiresAt.toISOString(), brief } }],
  );
  await recordAudit(client, {
    actor: "stepwise",
    action: "task.leased",
    planId: session.plan_id,
    planVersion: run.rows[0]!.plan_version,
    runId: session.run_id,
    stepId: step.id,
    detail: { sessionId: session.id, agent, expiresAt: expiresAt.toISOString() },
  });
  return { step_id: step.id, agent, leased_at: leasedAt, expires_at: expiresAt, brief };
}

/** The task's brief: the task itself, the goal, its dependencies' DONE notes, the approvers' notes. */
async function buildBrief(
  client: pg.PoolClient,
  session: LeaseSession,
  step: Step,
  agent: string,
  expiresAt: Date,
  plan: { steps: Step[]; approverNotes: ApproverNote[]; workingDirectory: string },
): Promise<TaskBrief> {
  const results = await client.query<{ step_id: string; result: { value?: { note?: string } } | null; item: unknown }>(
    "select step_id, result, item from run_steps where run_id = $1 and (step_id = any($2) or step_id = $3)",
    [session.run_id, step.dependsOn, step.id],
  );
  const ref = taskRefOf(step.id);
  const instructions = (step.args as { instructions?: unknown }).instructions;
  const notes = new Map(results.rows.map((row) => [row.step_id, row.result?.value?.note ?? null]));
  const byId = new Map(plan.steps.map((other) => [other.id, other]));
  return {
    task_id: ref.id,
    // A fan-out instance: which one, and its element (written into its instructions already).
    ...(ref.instance !== undefined && {
      instance: ref.instance,
      item: results.rows.find((row) => row.step_id === step.id)?.item ?? null,
    }),
    ...(typeof instructions === "string" && { instructions }),
    title: step.title ?? step.description.split("\n")[0]!.slice(0, 200),
    ...(step.type && { type: step.type }),
    ...(step.description && { description: step.description }),
    goal: session.goal,
    context_hints: step.contextHints,
    relevant_file_paths: step.relevantFilePaths,
    acceptance: step.acceptance ?? [],
    dependency_notes: step.dependsOn.map((dep) => ({
      task_id: taskNumber(dep) ?? 0,
      title: byId.get(dep)?.title ?? dep,
      notes: typeof notes.get(dep) === "string" ? notes.get(dep)! : null,
    })),
    approver_notes: plan.approverNotes.filter((note) => note.about === "plan" || note.about === step.id),
    working_directory: plan.workingDirectory,
    assignee: agent,
    lease_expires_at: expiresAt.toISOString(),
  };
}
