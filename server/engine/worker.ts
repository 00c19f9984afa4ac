import { Logger, run as runGraphileWorker, type Runner } from "graphile-worker";
import pg from "pg";
import { abortRunLocally, executeStepJob, type EngineDeps } from "./engine";
import { RUN_STEP_TASK } from "./queue";

export interface StepWorker {
  stop(): Promise<void>;
}

/**
 * A worker executes step jobs from the shared Postgres queue. Any number of them, in any number
 * of processes, can serve the same database: graphile-worker hands each job to exactly one.
 */
export async function startStepWorker(
  deps: EngineDeps,
  options: { databaseUrl: string; concurrency: number },
): Promise<StepWorker> {
  const runner: Runner = await runGraphileWorker({
    connectionString: options.databaseUrl,
    concurrency: options.concurrency,
    maxPoolSize: options.concurrency + 2,
    noHandleSignals: true,
    pollInterval: 1000,
    logger: quietLogger(),
    taskList: {
      [RUN_STEP_TASK]: async (payload) => {
        await executeStepJob(deps, payload as { runId: string; stepId: string; attempt: number });
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
  return {
    async stop() {
      await runner.stop();
      await listener.end().catch(() => undefined);
    },
  };
}

/** graphile-worker's default logger prints every job; keep warnings and errors only. */
function quietLogger(): Logger {
  return new Logger(() => (level, message) => {
    if (level === "error" || level === "warning") console.error(`[worker] ${message}`);
  });
}
