import { inTransaction, lockTimeoutMs } from "../db";
import { isLockTimeout } from "../database-faults";
import type { StepStatus } from "../plan-schema";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { RUN_PLAN_TOOL } from "../tools/run-plan";
import type { EngineDeps } from "./deps";
import { recordOutcomeIn } from "./outcome";
import { enqueueStepJobs, type StepJob } from "../queue/jobs";
import { actsInWorkspace } from "../tools/types";
import { MISSED_BEATS, unlockJobsOfDeadWorkers } from "./queue-locks";
import { loadPlanSteps, openRunTransaction, type Client, type RunTransaction } from "./run-transaction";
import { ACTIVE_RUN_STATUSES } from "../vocabulary";

/** SQL: the worker owning step row `rs` has beaten within its own MISSED_BEATS intervals. */
const OWNER_ALIVE = `exists (select 1 from workers w where w.id = rs.worker_id and w.stopped_at is null
  and w.last_seen > now() - make_interval(secs => w.heartbeat_ms * ${MISSED_BEATS} / 1000.0))`;

/**
 * SQL: step row `rs` may be taken from its worker — the worker stopped (its shutdown gave up on the
 * step), or its lease ran out and its heartbeat is older than a whole lease. A step with no lease
 * (claimed outside a worker) is judged by its worker's heartbeat alone.
 */
const TAKEN_OVER = `(exists (select 1 from workers w where w.id = rs.worker_id and w.stopped_at is not null)
  or (coalesce(rs.lease_expires_at < now(), true) and not ${OWNER_ALIVE}))`;

/**
 * Renews the leases of the attempts this worker is executing (or still recording). An attempt
 * whose row no longer names it (recovered by a peer after its lease ran out, cancelled) is aborted
 * here: another attempt may already be running, and this one's outcome would not be recorded.
 * A lease that lapsed during a short cut but was not yet taken is simply renewed.
 *
 * The renewal never waits for a row lock: an engine transaction holding the run's lock may hold
 * some of these rows and want others, and a renewal waiting on it while holding those others was a
 * deadlock (seen under load: a second of stall, then one side rolled back). Rows locked right now
 * are skipped and renewed on the next beat — a lease outlasts several beats — and whether an
 * attempt is still this worker's is read from the snapshot, which no lock holds up.
 */
export async function renewLeases(deps: EngineDeps): Promise<void> {
  const inFlight = [...(deps.inFlight?.values() ?? [])];
  if (!deps.workerId || !deps.leaseMs || inFlight.length === 0) return;
  const result = await deps.pool.query<{ key: string }>(
    `with attempts as (
       select * from jsonb_to_recordset($3::jsonb) as u(run_id uuid, step_id text, attempt int)
     ),
     mine as (
       select rs.run_id, rs.step_id, rs.attempt from run_steps rs
       join attempts u on rs.run_id = u.run_id and rs.step_id = u.step_id and rs.attempt = u.attempt
       where rs.status = 'running' and rs.worker_id = $1
     ),
     free as (
       -- Checked again on the row as locked: a peer may have taken it since the snapshot.
       select rs.run_id, rs.step_id from run_steps rs
       join mine m on rs.run_id = m.run_id and rs.step_id = m.step_id and rs.attempt = m.attempt
       where rs.status = 'running' and rs.worker_id = $1
       for update of rs skip locked
     ),
     renewed as (
       update run_steps rs set lease_expires_at = now() + make_interval(secs => $2::int / 1000.0)
       from free f where rs.run_id = f.run_id and rs.step_id = f.step_id
     )
     select run_id || '/' || step_id || '/' || attempt as key from mine`,
    [
      deps.workerId,
      deps.leaseMs,
      JSON.stringify(inFlight.map(({ runId, stepId, attempt }) => ({ run_id: runId, step_id: stepId, attempt }))),
    ],
  );
  const held = new Set(result.rows.map((row) => row.key));
  for (const [key, entry] of deps.inFlight ?? []) {
    if (!held.has(key) && inFlight.includes(entry) && !entry.controller.signal.aborted) {
      entry.controller.abort(new LeaseLostError());
    }
  }
}

/** The abort reason of an attempt whose step is no longer this worker's to run. */
export class LeaseLostError extends Error {
  constructor() {
    super("The step was taken over: this worker lost its lease on it");
  }
}

/**
 * Steps whose worker stopped heartbeating were interrupted mid-execution. An idempotent tool's
 * step is queued again (at-least-once); any other becomes failed with an "interrupted" reason so
 * a person decides to retry or skip it. Completed steps are never touched.
 */
export async function recoverInterruptedSteps(deps: EngineDeps, staleAfterMs: number): Promise<number> {
  // Every queue job a dead worker held (webhooks, planning, timers, steps) is freed by the same
  // liveness rule, rather than after graphile-worker's 4-hour lock expiry.
  await unlockJobsOfDeadWorkers(deps.pool, deps.workerId);
  await requeueStrandedJobs(deps, staleAfterMs);
  await requeueLostJobs(deps);
  // A step is taken over only when both signs of its worker are gone: its lease ran out (renewed
  // by the worker's engine connections) and its heartbeat (beaten on a connection of its own) is
  // older than a whole lease — five of the worker's own intervals, as peers may be configured
  // differently — both judged by the database's clock. Either one alone is a worker that is alive
  // but slow to reach the database on one path, whose step must not run a second time elsewhere.
  // Its own steps a live worker never recovers: they are running here (or their outcomes are
  // being written), even if its own heartbeat went stale while the database was out of reach.
  const orphans = await deps.pool.query<{ run_id: string; step_id: string; attempt: number; worker_id: string | null }>(
    `select rs.run_id, rs.step_id, rs.attempt, rs.worker_id from run_steps rs
     where rs.status = 'running' and rs.tool <> all($2::text[]) and rs.group_size is null
       and rs.worker_id is distinct from $1
       and ${TAKEN_OVER}
     order by rs.started_at`,
    // Agent tasks are held by their agents' leases, sub-plan steps by their child runs: no worker.
    [deps.workerId ?? null, [AGENT_TASK_TOOL, RUN_PLAN_TOOL]],
  );
  for (const orphan of orphans.rows) {
    await inTransaction(deps.pool, async (client) => {
      const tx = await openRunForRecovery(deps, client, orphan.run_id);
      if (!tx) return;
      // Judged again under the lock: the owner may have beaten since the scan.
      const current = await client.query<{
        status: StepStatus;
        attempt: number;
        worker_id: string | null;
        effects_started: boolean;
        held: boolean;
      }>(
        `select rs.status, rs.attempt, rs.worker_id, rs.effects_started_at is not null as effects_started,
                not ${TAKEN_OVER} as held
         from run_steps rs where rs.run_id = $1 and rs.step_id = $2 for update of rs skip locked`,
        [orphan.run_id, orphan.step_id],
      );
      const row = current.rows[0];
      if (row?.status !== "running" || row.attempt !== orphan.attempt || row.worker_id !== orphan.worker_id) return;
      if (row.held) return;
      const step = tx.graph.steps.get(orphan.step_id)!;
      tx.statuses.set(step.id, row.status);
      const tool = deps.tools.get(step.tool);
      const reason = interruptedReason(row.effects_started);
      tx.events.push({
        type: "step.interrupted",
        stepId: step.id,
        data: {
          attempt: row.attempt,
          idempotent: tool?.idempotent ?? false,
          effectsStarted: row.effects_started,
          reason,
        },
      });
      if (tool?.idempotent && tx.run.status !== "cancelled") {
        await client.query(
          "update run_steps set status = 'ready', queued = true, worker_id = null where run_id = $1 and step_id = $2",
          [orphan.run_id, orphan.step_id],
        );
        tx.noteStatus(step.id, "ready");
        tx.jobs.push({ runId: orphan.run_id, stepId: step.id, attempt: row.attempt + 1 });
        tx.events.push({
          type: "step.retrying",
          stepId: step.id,
          data: { status: "ready", attempt: row.attempt, error: "Interrupted: its worker stopped", delayMs: 0 },
        });
      } else {
        await recordOutcomeIn(
          tx,
          step.id,
          row.attempt,
          { ok: false, error: reason, reason, retryable: false },
          0,
          deps,
        );
      }
      await tx.flush();
    });
  }
  return orphans.rowCount ?? 0;
}

/** How long recovery waits in line for a busy run's lock before passing the run over. */
export const RECOVERY_LOCK_WAIT_MS = 250;

/**
 * Opens a run for recovery without waiting long for its lock. A run locked elsewhere is not
 * waited for as engine work waits: its holder may be a frozen worker (SIGSTOP), and one stuck
 * recovery would stall every other run's recovery; the server ends a frozen holder's session after
 * idle_in_transaction_session_timeout. But skipping at the first sight of the lock is not enough
 * either: a busy run's transactions follow each other back to back, so its lock is almost never
 * free at the instant of a look, and its dead worker's steps waited minutes. So recovery queues for
 * the lock like any transaction, for `RECOVERY_LOCK_WAIT_MS` — enough to get it between two engine
 * transactions — and only then passes the run over until the next tick.
 */
async function openRunForRecovery(
  deps: EngineDeps,
  client: Client,
  runId: string,
): Promise<RunTransaction | undefined> {
  const free = await openRunTransaction(deps, client, runId, { skipLocked: true });
  if (free) return free;
  await client.query("savepoint recovery_lock");
  await client.query(`set local lock_timeout = ${RECOVERY_LOCK_WAIT_MS}`);
  try {
    const tx = await openRunTransaction(deps, client, runId);
    await client.query(`set local lock_timeout = ${lockTimeoutMs()}`);
    return tx;
  } catch (error) {
    if (!isLockTimeout(error)) throw error;
    // Undoes the wait's error and its setting; the transaction goes on without this run.
    await client.query("rollback to savepoint recovery_lock");
    return undefined;
  }
}

/**
 * What a person is told about a step whose worker died: whether its side effect may have happened
 * (the effect's start is recorded before it begins; see `markEffectsStarted`).
 */
export function interruptedReason(effectsStarted: boolean): string {
  return effectsStarted
    ? "Interrupted: its worker stopped or lost touch while it ran; its command may have run; check before retrying"
    : "Interrupted: its worker stopped or lost touch; its command had not started; safe to retry";
}

/**
 * A worker that died after taking a step's job off the queue but before claiming it leaves the
 * job locked (graphile-worker frees such locks only after hours) and the step ready. Such a step
 * gets a fresh job for the same attempt; should the stranded one ever run, its claim finds the step
 * no longer ready and does nothing.
 */
async function requeueStrandedJobs(deps: EngineDeps, staleAfterMs: number): Promise<void> {
  const stranded = await deps.pool.query<QueuedStepRow>(
    `select rs.run_id, rs.step_id, rs.attempt, r.plan_id, r.plan_version, r.workspace_root from run_steps rs
     join runs r on r.id = rs.run_id
     join graphile_worker.jobs j on j.key = rs.run_id || ':' || rs.step_id || ':' || (rs.attempt + 1)
     where rs.status = 'ready' and rs.queued and j.locked_at < now() - make_interval(secs => $1)`,
    [staleAfterMs / 1000],
  );
  if (stranded.rowCount === 0) return;
  await enqueueStepJobs(deps.pool, await routedJobs(deps, stranded.rows, { requeued: true }));
}

/**
 * A queued step whose job is gone (deleted by an operator cleaning the queue, or failed for good
 * after the queue's own attempts) would wait for ever. It gets its job again under the same key
 * (the queue moves the key off a job that failed for good and adds a fresh one). The scan is one statement, so
 * it sees a step and its job as of one moment: a job is added in the transaction that queues its
 * step and leaves the queue only after the step was claimed. A job that is locked (running, even on
 * its last queue attempt) is not lost; should two workers re-add the same job at once, the keys
 * make it one, and a duplicate's claim finds the step no longer ready.
 */
async function requeueLostJobs(deps: EngineDeps): Promise<void> {
  const lost = await deps.pool.query<QueuedStepRow>(
    `select rs.run_id, rs.step_id, rs.attempt, r.plan_id, r.plan_version, r.workspace_root
     from run_steps rs join runs r on r.id = rs.run_id
     where rs.status = 'ready' and rs.queued and r.status = any($1)
       and not exists (
         select 1 from graphile_worker.jobs j
         where j.key in (rs.run_id || ':' || rs.step_id || ':' || (rs.attempt + 1),
                         rs.run_id || ':' || rs.step_id || ':' || (rs.attempt + 1) || ':requeued')
           and (j.locked_at is not null or j.attempts < j.max_attempts))`,
    [ACTIVE_RUN_STATUSES],
  );
  if (lost.rowCount === 0) return;
  await enqueueStepJobs(deps.pool, await routedJobs(deps, lost.rows, {}));
}

interface QueuedStepRow {
  run_id: string;
  step_id: string;
  attempt: number;
  plan_id: string;
  plan_version: number;
  workspace_root: string;
}

/** Jobs for queued steps, each for the workers serving the step's workspace (as RunTransaction.flush queues them). */
async function routedJobs(deps: EngineDeps, rows: QueuedStepRow[], extra: { requeued?: boolean }): Promise<StepJob[]> {
  const jobs: StepJob[] = [];
  for (const row of rows) {
    const graph = await deps.graphs.get(row.plan_id, row.plan_version, () =>
      loadPlanSteps(deps.pool, row.plan_id, row.plan_version),
    );
    const step = graph.steps.get(row.step_id);
    const workspace = actsInWorkspace(step && deps.tools.get(step.tool)) ? row.workspace_root : undefined;
    jobs.push({
      runId: row.run_id,
      stepId: row.step_id,
      attempt: row.attempt + 1,
      ...extra,
      ...(workspace !== undefined && { workspace }),
    });
  }
  return jobs;
}
