import type pg from "pg";
import type { Step } from "../plan-schema";
import type { SignalLevel } from "../vocabulary";

/*
 * The writes to an agent session's signals that the engine makes itself: a task that fails for
 * good raises a blocker in the transaction that records the failure (server/engine/outcome.ts).
 * The agents' session code raises its own through the same upsert; what is open is read in
 * server/agents/signal-store.ts.
 */

type Queryable = Pick<pg.ClientBase, "query">;

/** `step_7` → 7: seed 003 numbers tasks, Stepwise numbers steps; they are the same number. */
export function taskNumber(stepId: string): number | null {
  const match = /^step_(\d+)$/.exec(stepId);
  return match ? Number(match[1]) : null;
}

/**
 * Raises or refreshes the open signal `key` of a session: one open signal per name, so a test
 * that fails again updates its message instead of piling up copies. Returns whether it is new.
 */
export async function upsertSignal(
  client: Queryable,
  signal: {
    sessionId: string;
    key: string;
    taskId: number | null;
    level: SignalLevel;
    message: string;
    raisedBy: string;
  },
): Promise<boolean> {
  const updated = await client.query(
    `update signals set level = $3, message = $4, task_id = $5, raised_by = $6, raised_at = now()
     where session_id = $1 and key = $2 and cleared_at is null`,
    [signal.sessionId, signal.key, signal.level, signal.message, signal.taskId, signal.raisedBy],
  );
  if (updated.rowCount) return false;
  await client.query(
    `insert into signals (session_id, key, task_id, level, message, raised_by) values ($1, $2, $3, $4, $5, $6)`,
    [signal.sessionId, signal.key, signal.taskId, signal.level, signal.message, signal.raisedBy],
  );
  return true;
}

/**
 * Called by the engine, in the transaction that records a step's final failure: when the run is
 * an agent session's, the failure becomes a blocker signal the agent sees in its next `status`
 * (seed 003 Response C). Returns whether the run belongs to a session.
 */
export async function raiseFailureSignal(
  client: Queryable,
  runId: string,
  step: Step,
  error: string,
): Promise<{ id: string; level: SignalLevel; message: string } | undefined> {
  const session = await client.query<{ id: string }>(
    "select id from agent_sessions where run_id = $1 and closed_at is null",
    [runId],
  );
  const sessionId = session.rows[0]?.id;
  if (!sessionId) return undefined;
  const number = taskNumber(step.id);
  const what = step.title ?? step.description ?? step.tool;
  const kind = step.type === "test" || /\btest/i.test(what) ? "test_failure" : "task_failure";
  const signal = {
    id: `${kind}_${number ?? step.id}`,
    level: "blocker" as const,
    message: `Task ${number ?? step.id} (${what}) failed: ${error.slice(0, 2_000)}`,
  };
  await upsertSignal(client, { sessionId, key: signal.id, taskId: number, raisedBy: "stepwise", ...signal });
  return signal;
}
