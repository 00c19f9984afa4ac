import type pg from "pg";
import type { AppContext } from "../services";
import type { AgentTaskStatus } from "../engine/agent-tasks";
import { AppError } from "../errors";
import type { Step } from "../plan-schema";
import type { ApproverNote } from "./contract";
import { taskLabel } from "./task-ref";
import { leaseTo, type LeaseSession } from "./leases";
import { existingWorkingDirectory } from "./task-working-directory";

/** The leases' side of an agent's `update` (see leases.ts): who may report on a task, and what a report does to its lease. */
type App = Pick<AppContext, "db" | "engine" | "tools" | "workspaceRoot">;

/**
 * Before an agent's `update` is applied: a status change on a task another agent holds under a
 * live lease is refused whole, naming the holder. Runs in the session's locked transaction, so a
 * hand-out cannot slip in between the check and the write.
 */
export async function refuseOthersTasks(
  client: pg.PoolClient,
  sessionId: string,
  agent: string,
  stepIds: string[],
): Promise<void> {
  if (stepIds.length === 0) return;
  const held = await client.query<{ step_id: string; agent: string }>(
    `select step_id, agent from agent_task_leases
      where session_id = $1 and step_id = any($2) and agent <> $3 and expires_at > clock_timestamp()
      order by step_id`,
    [sessionId, stepIds, agent],
  );
  if (held.rows.length === 0) return;
  const problems = held.rows.map(
    (row) =>
      `Task ${taskLabel(row.step_id)} is leased to agent '${row.agent}', not to you ('${agent}'); only its holder reports on it. Run \`stepwise status --json\` for a task of your own.`,
  );
  throw new AppError("invalid_state", problems.join(" "), { details: problems });
}

/**
 * After an agent's `update` was applied: DONE, CANCELLED and TODO end the task's lease (the task
 * is settled, or handed back for anyone); IN_PROGRESS on a task nobody holds makes it the agent's.
 */
export async function settleLeases(
  app: App,
  client: pg.PoolClient,
  session: LeaseSession,
  agent: string,
  updates: { stepId: string; status: AgentTaskStatus }[],
  plan: { steps: Step[]; approverNotes: ApproverNote[] },
): Promise<void> {
  const ended = updates.filter((update) => update.status !== "IN_PROGRESS").map((update) => update.stepId);
  if (ended.length > 0) {
    await client.query("delete from agent_task_leases where session_id = $1 and step_id = any($2)", [
      session.id,
      ended,
    ]);
  }
  const started = updates.filter((update) => update.status === "IN_PROGRESS").map((update) => update.stepId);
  if (started.length === 0) return;
  const held = await client.query<{ step_id: string }>(
    "select step_id from agent_task_leases where session_id = $1 and step_id = any($2)",
    [session.id, started],
  );
  const heldIds = new Set(held.rows.map((row) => row.step_id));
  const settings = await client.query<{ lease_seconds: number }>(
    "select lease_seconds from agent_sessions where id = $1",
    [session.id],
  );
  for (const stepId of started) {
    const step = plan.steps.find((candidate) => candidate.id === stepId);
    if (!step || heldIds.has(stepId)) continue;
    const workingDirectory = await existingWorkingDirectory({
      workspaceRoot: session.workspace_root,
      runId: session.run_id,
      stepId,
    });
    await leaseTo(app, client, session, agent, step, {
      ...plan,
      leaseSeconds: settings.rows[0]!.lease_seconds,
      workingDirectory,
    });
  }
}
