import type { AppContext } from "../services";
import { adoptPlanVersionIntoRun } from "../engine/engine";
import { AppError } from "../errors";
import type { Step, StepStatus } from "../plan-schema";
import { AGENT_TASK_TOOL, verifierCommands } from "../tools/agent-task";
import type { AgentTaskView, ApproverNote } from "./contract";
import { noteAgentCall, REPORTED_SQL } from "./leases";
import { taskNumber } from "../engine/agent-signals";
import { openSignals, type OpenSignal } from "./signal-store";
import type { SessionRow } from "./sessions";
import { actorKindOf } from "../caller-context";
import { instanceDefinition, parseInstanceId } from "../fan-out-instance";
import { taskRefOf } from "./task-ref";

/** A session's state as an agent's call reads it, and its tasks as the agent sees them. */
type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

export interface Loaded {
  session: SessionRow;
  runStatus: string;
  approverNotes: ApproverNote[];
  /** The version's steps, each fan-out template followed by its instances (their elements in `items`). */
  steps: Step[];
  items: Map<string, unknown>;
  statuses: Map<string, StepStatus>;
  /** Tasks reported DONE whose integration runs off the call (task-reports.ts): shown as `merging`. */
  reported: Set<string>;
  signals: OpenSignal[];
  lastStepNumber: number;
  planVersion: number;
}

/**
 * Reads a session's state. A plan version newer than the run's (a person's edit in the browser,
 * or tasks added just before a crash) is adopted into the run first, so what the agent is told
 * always matches the plan people see.
 */
export async function loadSession(app: App, session: SessionRow): Promise<Loaded> {
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
    app.db.pool.query<{ step_id: string; status: StepStatus; reported: boolean }>(
      `select r.step_id, r.status, ${REPORTED_SQL} as reported from run_steps r where r.run_id = $1`,
      [session.run_id, session.id],
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
  const { steps, items } = await withInstances(app, session.run_id, version.rows[0]!.steps, [...stepRows.rows]);
  return {
    session,
    runStatus: runRow.rows[0]!.status,
    approverNotes,
    steps,
    items,
    statuses: new Map(stepRows.rows.map((row) => [row.step_id, row.status])),
    reported: new Set(stepRows.rows.filter((row) => row.reported).map((row) => row.step_id)),
    signals,
    lastStepNumber: plan.rows[0]!.last_step_number,
    planVersion,
  };
}

/**
 * Each fan-out instance of the run is a task of its own: its template's definition with its
 * element written in (as the engine runs it), listed right after the template.
 */
async function withInstances(
  app: Pick<App, "db">,
  runId: string,
  planSteps: Step[],
  rows: { step_id: string }[],
): Promise<{ steps: Step[]; items: Map<string, unknown> }> {
  const items = new Map<string, unknown>();
  if (!rows.some((row) => parseInstanceId(row.step_id))) return { steps: planSteps, items };
  const made = await app.db.pool.query<{ step_id: string; template_id: string; item: unknown }>(
    "select step_id, template_id, item from run_steps where run_id = $1 and template_id is not null",
    [runId],
  );
  const byTemplate = new Map<string, { step_id: string; item: unknown }[]>();
  for (const row of made.rows) byTemplate.set(row.template_id, [...(byTemplate.get(row.template_id) ?? []), row]);
  const steps = planSteps.flatMap((template) => {
    const instances = (byTemplate.get(template.id) ?? [])
      .map((row) => ({ ...row, index: parseInstanceId(row.step_id)!.index }))
      .sort((a, b) => a.index - b.index);
    for (const row of instances) items.set(row.step_id, row.item);
    return [template, ...instances.map((row) => instanceDefinition(template, row.index, row.item))];
  });
  return { steps, items };
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

export function taskView(step: Step, status: StepStatus, items?: ReadonlyMap<string, unknown>): AgentTaskView {
  const ref = taskRefOf(step.id);
  const instructions =
    step.tool === AGENT_TASK_TOOL ? (step.args as { instructions?: unknown }).instructions : undefined;
  return {
    id: ref.id,
    ...(ref.instance !== undefined && { instance: ref.instance, item: items?.get(step.id) ?? null }),
    title: step.title ?? step.description.split("\n")[0]!.slice(0, 200),
    ...(step.type && { type: step.type }),
    status: SEED_STATUS[status],
    dependencies: step.dependsOn.map((dep) => taskNumber(dep) ?? 0),
    context_hints: step.contextHints,
    relevant_file_paths: step.relevantFilePaths,
    ...(step.acceptance?.length && { acceptance: step.acceptance }),
    // A fan-out task's group is Stepwise's; its instances are the agent's.
    executor: step.tool === AGENT_TASK_TOOL && step.forEach === undefined ? "agent" : "stepwise",
    state: status,
    ...taskChecksView(step),
    ...(typeof instructions === "string" && { instructions }),
    ...(step.forEach !== undefined && { for_each: step.forEach }),
  };
}

export function tasksOf(loaded: Loaded): AgentTaskView[] {
  return loaded.steps.map((step) => {
    const view = taskView(step, loaded.statuses.get(step.id) ?? "pending", loaded.items);
    // Reported DONE, being merged: not the agent's to carry on, not DONE yet.
    return loaded.reported.has(step.id) ? { ...view, state: MERGING_STATE } : view;
  });
}

/** The state agents see of a task reported DONE while Stepwise commits, checks and merges it. */
export const MERGING_STATE = "merging";

/** The agent called: the session's idle time starts again (the run page shows it). */
export async function seen(app: Pick<App, "db">, session: SessionRow, caller: string | undefined): Promise<void> {
  if (caller === undefined) return;
  await app.db.pool.query("update agent_sessions set last_seen_at = now() where id = $1", [session.id]);
  // Any call is the agent's heartbeat: its leases run on.
  await noteAgentCall(app, session.id, caller, { listed: actorKindOf(caller) !== "person" });
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
