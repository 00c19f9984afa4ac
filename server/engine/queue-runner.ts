import type pg from "pg";
import { Logger, run as runGraphileWorker, type Runner, type WorkerEvents } from "graphile-worker";
import { retryOnConnectionLoss } from "../database-faults";
import { logger } from "../logger";

/*
 * graphile-worker's runner as the step worker uses it (worker.ts): started on the queue's pool,
 * quiet, polling seldom, and woken when a delayed step job falls due.
 */

/** A job handler on the queue: its payload, and what graphile-worker says of the job (when it was due). */
export type QueueTask = (payload: unknown, helpers: { job: { id: string; run_at: Date } }) => Promise<void>;

const log = logger.child({ component: "worker" });

/** Starts graphile-worker's runner on the queue's pool, waiting for the database as long as it takes. */
export function startQueueRunner(
  queue: { pool: pg.Pool; events: WorkerEvents; taskList: Record<string, QueueTask> },
  options: { concurrency: number; queuePollIntervalMs?: number },
  state: { stopping: boolean },
): Promise<Runner> {
  return retryOnConnectionLoss(
    () =>
      runGraphileWorker({
        pgPool: queue.pool,
        events: queue.events,
        concurrency: options.concurrency,
        noHandleSignals: true,
        pollInterval: options.queuePollIntervalMs ?? queuePollIntervalMs(options.concurrency),
        logger: quietLogger(),
        // Batched job completion retries a failed write with backoff and reports a final failure
        // to graphile's handler; the unbatched path leaves it as an unhandled rejection, which
        // kills the process on a dropped connection. Our own step state is already committed by
        // then; a job left locked is re-queued by recovery and its late run finds nothing to do.
        preset: { worker: { completeJobBatchDelay: 0, failJobBatchDelay: 0 } },
        taskList: queue.taskList,
      }),
    { maxDelayMs: 5_000, shouldStop: () => state.stopping },
  );
}

/** graphile-worker's default logger prints every job; keep warnings and errors only. */
export function quietLogger(): Logger {
  return new Logger(() => (level, message) => {
    // A queue pool smaller than the concurrency is by design (see the connection budget in db.ts).
    if (message.includes("smaller than concurrency")) return;
    if (level === "error" || level === "warning") log.warn({ source: "graphile-worker" }, message);
  });
}

/**
 * Each of graphile-worker's workers (one per unit of concurrency) polls the queue while idle: at
 * 250 ms, an idle process of concurrency 50 sent 200 queries a second — a tenth of a core on the
 * database and in the process, taken from the steps running beside them. Polling only finds
 * delayed jobs (LISTEN/NOTIFY covers immediate ones), and the one delay that is short, a step
 * retry's backoff, wakes the queue itself (`queueAlarm`); timers of minutes (approval expiry,
 * planning questions) and webhook retries can be a few seconds late. So the process as a whole
 * polls about 25 times a second whatever its concurrency, and never less often than every 5 s.
 */
export function queuePollIntervalMs(concurrency: number): number {
  return Math.min(5_000, Math.max(250, concurrency * 40));
}

/**
 * Wakes the queue when a delayed step job falls due, with the NOTIFY graphile-worker's `add_job`
 * sends for an immediate job: an idle worker of any process then takes it at once instead of at
 * its next poll. A few milliseconds late rather than early: a worker woken before the job is due
 * finds nothing and sleeps a whole poll interval.
 */
export function queueAlarm(pool: pg.Pool): { wakeIn: (delayMs: number) => void; stop: () => void } {
  const timers = new Set<NodeJS.Timeout>();
  let stopped = false;
  return {
    wakeIn(delayMs) {
      if (stopped) return;
      const timer = setTimeout(
        () => {
          timers.delete(timer);
          pool.query(`select pg_notify('jobs:insert', '{"count":1}')`).catch(() => undefined);
        },
        Math.max(0, delayMs) + 5,
      );
      timer.unref();
      timers.add(timer);
    },
    stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      timers.clear();
    },
  };
}
