import { raiseFailureSignal } from "./agent-signals";
import type { StepResult } from "../vocabulary";
import { advance } from "./advance";
import { enqueueAutoRecovery } from "../queue/jobs";
import type { EngineDeps } from "./deps";
import type { RunTransaction } from "./run-transaction";
import { retryDelayMs } from "./scheduler";

export type Outcome =
  | { ok: true; value: unknown }
  /** `reason`: the person-facing reason stored on the failed step, when the error alone is not it. */
  | {
      ok: false;
      error: string;
      retryable: boolean;
      reason?: string;
      waitingForDatabase?: boolean;
      /** Stopped by a gentle shutdown, its processes gone: the same attempt runs again. */
      interrupted?: boolean;
    };

/** How long a step that could not reach the database before its command started waits to try again. */
export const DATABASE_WAIT_RETRY_MS = 3_000;

export async function recordOutcomeIn(
  tx: RunTransaction,
  stepId: string,
  attempt: number,
  outcome: Outcome,
  duration: number,
  deps: EngineDeps,
  advanceNow = true,
): Promise<boolean> {
  const step = tx.graph.steps.get(stepId)!;
  const timestamp = tx.now.toISOString();
  if (!outcome.ok && outcome.interrupted && tx.run.status !== "running") {
    // Not given back while the run is paused or over: the step stays running under the stopping
    // worker, and recovery decides once its row is gone, as before a gentle stop gave attempts back.
    return false;
  }
  if (!outcome.ok && (outcome.waitingForDatabase || outcome.interrupted) && tx.run.status === "running") {
    // Its command never started (a full or unreachable database), or a gentle stop ended it with
    // every process gone: the same attempt is made again, so neither costs the step's retries
    // (claims expect the attempt before the job's).
    const delayMs = outcome.interrupted ? 0 : Math.round(DATABASE_WAIT_RETRY_MS * (1 + (deps.random ?? Math.random)()));
    tx.stepRowsWrittenDirectly();
    await tx.client.query(
      `update run_steps set status = 'ready', queued = true, error = $3, attempt = $4 - 1, worker_id = null,
         lease_expires_at = null, effects_started_at = null
       where run_id = $1 and step_id = $2`,
      [tx.run.id, stepId, outcome.error, attempt],
    );
    tx.noteStatus(stepId, "ready");
    tx.jobs.push({ runId: tx.run.id, stepId, attempt, runAt: new Date(tx.now.getTime() + delayMs) });
    tx.events.push({
      type: "step.retrying",
      stepId,
      data: {
        status: "ready",
        attempt,
        error: outcome.error,
        delayMs,
        ...(outcome.interrupted ? { interrupted: true } : { waitingForDatabase: true }),
      },
    });
    return false;
  }
  if (!outcome.ok && outcome.retryable && attempt < step.retry.maxAttempts && tx.run.status === "running") {
    const delayMs = retryDelayMs(attempt, step.retry.backoffMs, deps.random);
    tx.stepRowsWrittenDirectly();
    await tx.client.query(
      "update run_steps set status = 'ready', queued = true, error = $3 where run_id = $1 and step_id = $2",
      [tx.run.id, stepId, outcome.error],
    );
    tx.noteStatus(stepId, "ready");
    tx.jobs.push({ runId: tx.run.id, stepId, attempt: attempt + 1, runAt: new Date(tx.now.getTime() + delayMs) });
    tx.events.push({
      type: "step.retrying",
      stepId,
      data: { status: "ready", attempt, error: outcome.error, delayMs },
    });
    return false;
  }
  const result: StepResult = outcome.ok
    ? { ok: true, value: outcome.value, duration, timestamp }
    : { ok: false, error: outcome.error, duration, timestamp };
  tx.setResult(stepId, result);
  const status = outcome.ok ? "completed" : "failed";
  tx.setStatus(stepId, status, outcome.ok ? undefined : outcome.reason, { attempt, result });
  tx.run.open_steps--;
  tx.run.active_steps--;
  if (!outcome.ok && step.critical && tx.run.status === "running") {
    tx.run.status = "failing";
    tx.events.push({ type: "run.failing", data: { status: "failing", reason: `Critical step ${stepId} failed` } });
  }
  // In an agent's session a failed step (a test run, a build) is a blocker the agent must fix.
  const signal = outcome.ok ? undefined : await raiseFailureSignal(tx.client, tx.run.id, step, outcome.error);
  if (signal) {
    tx.events.push({ type: "signal.raised", stepId, data: { ...signal, raisedBy: "stepwise" } });
    await holdForSignal(tx, `Blocked by the failure of ${stepId}`);
  }
  // The run's policy may apply a recovery proposal without a person: a job in this transaction, so
  // it exists exactly when the failure is recorded (agent tasks are recovered by their agent).
  if (!outcome.ok && tx.run.recovery_policy === "auto" && step.tool !== "agent_task") {
    await enqueueAutoRecovery(tx.client, { runId: tx.run.id, stepId, attempt });
  }
  if (advanceNow) await advance(tx, [stepId]);
  return true;
}

/**
 * A blocker signal in an agent's session pauses its run: running steps finish, nothing new starts.
 * The session remembers that the pause is the signal's, so clearing the signal lifts only that.
 */
export async function holdForSignal(tx: RunTransaction, reason: string): Promise<boolean> {
  if (tx.run.status !== "running") return false;
  tx.run.status = "paused";
  tx.events.push({ type: "run.paused", data: { status: "paused", reason } });
  await tx.client.query("update agent_sessions set paused_by_signal = true where run_id = $1", [tx.run.id]);
  return true;
}
