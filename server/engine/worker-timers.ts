import { createPool } from "../db";
import { isConnectionError, isLockTimeout } from "../database-faults";
import { logger } from "../logger";
import { MISSED_BEATS, recoverInterruptedSteps, renewLeases, type EngineDeps } from "./engine";
import type { QueueTask } from "./queue-runner";

/**
 * The step worker's timers (worker.ts starts them): its heartbeat on a connection of its own, the
 * renewal of its steps' leases, and the maintenance pass that recovers what stopped workers left.
 */

const log = logger.child({ component: "worker" });

/** A job handler on the queue: its payload, and what graphile-worker says of the job (when it was due). */

/**
 * Work other than steps that a worker also takes from the queue (the planner's sessions): its
 * task handlers, a maintenance pass on each heartbeat tick (recovering what dead workers left),
 * and an abort for what is still running when the shutdown grace period is over.
 */
export interface ExtraWork {
  tasks: Record<string, QueueTask>;
  /**
   * Handlers of work that reads or writes a workspace (a planning session), by task name: the
   * worker lists each once per workspace it serves (`<task>@<key>`), so only such a worker takes
   * the job — as for steps. The plain name is not listed by this; `tasks` may handle it.
   */
  workspaceTasks?: Record<string, QueueTask>;
  maintain?(): Promise<void>;
  abortAll?(): void;
}

/** What the worker's parts share while it runs: whether it is stopping, and how many step jobs run. */
export interface WorkerState {
  stopping: boolean;
  activeJobs: number;
}

/** A timer of the worker's: `clear` ends it, `running` is the tick under way, if any. */
export interface WorkerTimer {
  clear(): void;
  running(): Promise<void> | undefined;
}

/**
 * The heartbeat has a connection and a timer of its own: engine work queueing for the pool, or
 * a slow recovery pass, cannot make this worker look dead to its peers. Leases are renewed on
 * their own timer through the engine pool; a step is taken over only when both are stale (see
 * leases.ts), so a stall on one path alone costs no step. A failed beat is retried next tick.
 */
export function startHeartbeat(
  databaseUrl: string,
  workerId: string,
  heartbeatMs: number,
): { clear(): void; close(): Promise<void> } {
  const beatPool = createPool(databaseUrl, { max: 1, applicationName: "stepwise-heartbeat" });
  let beat: Promise<void> | undefined;
  const heartbeat = setInterval(() => {
    beat ??= beatPool
      .query("update workers set last_seen = now() where id = $1", [workerId])
      .then(
        () => undefined,
        (error: unknown) => {
          if (!isConnectionError(error) && !isLockTimeout(error)) log.error({ err: String(error) }, "heartbeat failed");
        },
      )
      .finally(() => (beat = undefined));
  }, heartbeatMs);
  return {
    clear: () => clearInterval(heartbeat),
    async close() {
      await beat;
      await beatPool.end().catch(() => undefined);
    },
  };
}

export function startLeaseRenewal(deps: EngineDeps, heartbeatMs: number, skip: boolean): WorkerTimer {
  let renewing: Promise<void> | undefined;
  const leaseRenewal = setInterval(() => {
    if (skip) return;
    renewing ??= renewLeases(deps)
      .catch((error: unknown) => {
        // A lease row locked by a transaction in flight is renewed on the next tick.
        if (!isConnectionError(error) && !isLockTimeout(error))
          log.error({ err: String(error) }, "lease renewal failed");
      })
      .finally(() => (renewing = undefined));
  }, heartbeatMs);
  return { clear: () => clearInterval(leaseRenewal), running: () => renewing };
}

/**
 * On its own tick, recovery of steps whose workers stopped: a run whose lock is busy is skipped
 * and looked at again on the next tick, seconds later.
 */
export function startMaintenance(
  deps: EngineDeps,
  state: WorkerState,
  options: {
    heartbeatMs: number;
    concurrency: number;
    extra: ExtraWork | undefined;
    restartRunner(why: string): Promise<void>;
    /** The step tasks this worker takes now: only their waiting jobs are its business. */
    stepTasks(): string[];
    /** Frees jobs locked to this worker's runners that none of its tasks has in hand. */
    freeJobsNotInHand?(): Promise<number>;
  },
): WorkerTimer {
  const { heartbeatMs, concurrency, extra, restartRunner } = options;
  let maintaining: Promise<void> | undefined;
  const maintenance = setInterval(() => {
    if (maintaining) return;
    maintaining = recoverInterruptedSteps(deps, heartbeatMs * MISSED_BEATS)
      .then(async () => {
        if (state.stopping) return;
        const freed = (await options.freeJobsNotInHand?.()) ?? 0;
        if (freed > 0) log.warn({ jobs: freed }, "freed queue jobs this worker's runners locked but never ran");
      })
      .then(() => (state.stopping ? undefined : extra?.maintain?.()))
      .then(async () => {
        // A runner wedged by a connection lost inside graphile takes no jobs although it has room:
        // due step jobs wait unlocked while this process runs fewer than it may. Replace it.
        if (state.stopping || state.activeJobs >= concurrency) return;
        const waiting = await deps.pool.query<{ n: number }>(
          `select count(*)::int as n from graphile_worker.jobs
           where task_identifier = any($1::text[]) and locked_at is null and attempts < max_attempts
             and run_at < now() - make_interval(secs => $2)`,
          [options.stepTasks(), (heartbeatMs * MISSED_BEATS) / 1000],
        );
        if (waiting.rows[0]!.n > 0 && state.activeJobs < concurrency && !state.stopping) {
          await restartRunner(`${waiting.rows[0]!.n} due jobs waited while it had room`);
        }
      })
      .catch((error: unknown) => {
        if (!isConnectionError(error)) log.error({ err: String(error) }, "recovery failed");
      })
      .finally(() => (maintaining = undefined));
  }, heartbeatMs);
  return { clear: () => clearInterval(maintenance), running: () => maintaining };
}
