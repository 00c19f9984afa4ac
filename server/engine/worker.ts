import { randomUUID } from "node:crypto";
import os from "node:os";
import { Logger, run as runGraphileWorker, type Runner } from "graphile-worker";
import pg from "pg";
import {
  abortRunLocally,
  executeStepJob,
  expireApproval,
  MISSED_BEATS,
  recoverInterruptedSteps,
  warnApprovalExpiring,
  type EngineDeps,
} from "./engine";
import { APPROVAL_EXPIRY_TASK, APPROVAL_WARNING_TASK, RUN_STEP_TASK } from "./queue";

export interface StepWorker {
  stop(): Promise<void>;
}

/**
 * A worker executes step jobs from the shared Postgres queue. Any number of them, in any number
 * of processes, can serve the same database: graphile-worker hands each job to exactly one.
 */
export async function startStepWorker(
  engine: EngineDeps,
  options: { databaseUrl: string; concurrency: number; heartbeatMs?: number },
): Promise<StepWorker> {
  const workerId = randomUUID();
  const deps: EngineDeps = { ...engine, workerId, continuationSlots: { limit: options.concurrency, used: 0 } };
  const heartbeatMs = options.heartbeatMs ?? Number(process.env.STEPWISE_HEARTBEAT_MS ?? 2000);
  await deps.pool.query("insert into workers (id, hostname, pid, heartbeat_ms) values ($1, $2, $3, $4)", [
    workerId,
    os.hostname(),
    process.pid,
    heartbeatMs,
  ]);
  // Each worker heartbeats and, on the same tick, recovers steps of workers that stopped doing so.
  const heartbeat = setInterval(() => {
    deps.pool
      .query("update workers set last_seen = now() where id = $1", [workerId])
      .then(() => recoverInterruptedSteps(deps, heartbeatMs * MISSED_BEATS))
      .catch((error: unknown) => console.error(`[worker] heartbeat: ${(error as Error).message}`));
  }, heartbeatMs);
  const runner: Runner = await runGraphileWorker({
    connectionString: options.databaseUrl,
    concurrency: options.concurrency,
    maxPoolSize: options.concurrency + 2,
    noHandleSignals: true,
    // Delayed jobs (retry backoff) are found by polling; LISTEN/NOTIFY covers immediate ones.
    pollInterval: 250,
    logger: quietLogger(),
    taskList: {
      [RUN_STEP_TASK]: async (payload) => {
        await executeStepJob(deps, payload as { runId: string; stepId: string; attempt: number });
      },
      [APPROVAL_WARNING_TASK]: async (payload) => {
        await warnApprovalExpiring(deps, payload as { runId: string; stepId: string; expiresAt: string });
      },
      [APPROVAL_EXPIRY_TASK]: async (payload) => {
        await expireApproval(deps, payload as { runId: string; stepId: string; expiresAt: string });
      },
    },
  });
  // Cancellation may be decided in another process; abort our in-flight steps of that run.
  const listener = new pg.Client({ connectionString: options.databaseUrl });
  listener.on("error", () => undefined);
  listener.on("notification", (message) => {
    if (message.channel === "stepwise_cancel" && message.payload) abortRunLocally(deps, message.payload);
  });
  await listener.connect();
  await listener.query("listen stepwise_cancel");
  const stop = async () => {
    clearInterval(heartbeat);
    await runner.stop();
    await deps.pool.query("delete from workers where id = $1", [workerId]).catch(() => undefined);
    await listener.end().catch(() => undefined);
  };
  let stopped: Promise<void> | undefined;
  return {
    // Idempotent: shutdown paths (signal handlers, context close) may both stop the worker.
    stop() {
      stopped ??= stop();
      return stopped;
    },
  };
}

/** graphile-worker's default logger prints every job; keep warnings and errors only. */
function quietLogger(): Logger {
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`[worker] ${message}`);
  });
}
