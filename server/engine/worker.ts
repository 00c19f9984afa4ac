import { randomUUID } from "node:crypto";
import { EventEmitter } from "node:events";
import os from "node:os";
import type { Runner, WorkerEvents } from "graphile-worker";
import { createPool } from "../db";
import { retryOnConnectionLoss } from "../database-faults";
import { DatabaseListener } from "../db/listener";
import { logger } from "../logger";
import { observeQueueLatency } from "../metrics/process-metrics";
import {
  ABORT_SETTLE_MS,
  abortAllLocally,
  abortRunLocally,
  executeStepJob,
  expireApproval,
  MISSED_BEATS,
  warnApprovalExpiring,
  type EngineDeps,
} from "./engine";
import {
  APPROVAL_EXPIRY_TASK,
  APPROVAL_WARNING_TASK,
  AUTO_RECOVERY_TASK,
  CANCEL_CHILD_RUNS_TASK,
  CHILD_RUN_FINISHED_TASK,
  START_CHILD_RUN_TASK,
  CANCEL_CHANNEL,
  WORKSPACES_CHANNEL,
} from "../queue/jobs";
import { freeJobsNotInHand, JobsInHand, recordQueueWorkerId } from "./queue-locks";
import { workerName } from "./run-view";
import { cancelChildRuns, recordChildRunFinished, startChildRun } from "./child-runs";
import { startHeartbeat, startLeaseRenewal, startMaintenance, type ExtraWork, type WorkerState } from "./worker-timers";
import { ServedWorkspaces, watchServedWorkspaces, type WorkspaceChoice } from "./served-workspaces";
import { queueAlarm, startQueueRunner, type QueueTask } from "./queue-runner";

export type { ExtraWork } from "./worker-timers";

export interface StepWorker {
  /**
   * Graceful: stops taking work, keeps heartbeating while in-flight steps finish within the grace
   * period, then aborts what is left (recovery treats those as interrupted) and leaves.
   */
  stop(options?: { graceMs?: number }): Promise<void>;
  /** Its id: its row in `workers`, and the `worker_id` of the steps it claims. */
  readonly id: string;
  /** The workspace paths it serves now (steps that touch none it runs anyway). */
  servedWorkspaces(): string[];
}

const log = logger.child({ component: "worker" });

/** How long a stopping worker lets in-flight steps finish before aborting them. */
const DEFAULT_GRACE_MS = Number(process.env.STEPWISE_SHUTDOWN_GRACE_MS ?? 10_000);

/**
 * A worker executes step jobs from the shared Postgres queue. Any number of them, in any number
 * of processes, can serve the same database: graphile-worker hands each job to exactly one.
 * No database error stops it: it waits for the database at start, and its heartbeat, cancel
 * listener and transactions ride out dropped connections.
 */
export async function startStepWorker(engine: EngineDeps, options: StepWorkerOptions): Promise<StepWorker> {
  const workerId = randomUUID();
  const heartbeatMs = options.heartbeatMs ?? Number(process.env.STEPWISE_HEARTBEAT_MS ?? 2000);
  const deps: EngineDeps = {
    ...engine,
    workerId,
    workerName: workerName({ hostname: os.hostname(), pid: process.pid }),
    continuationSlots: { limit: options.concurrency, used: 0 },
    // A lease lasts as long as the worker may stay silent before its peers give up on it.
    leaseMs: heartbeatMs * MISSED_BEATS,
    inFlight: new Map(),
  };
  const alarm = queueAlarm(deps.pool);
  deps.wakeQueueIn = alarm.wakeIn;
  const extra = options.extra?.({ workerId, heartbeatMs });
  // The workspaces this worker serves: its runner takes only their step jobs (and workspace-free
  // ones), and it claims only their steps as continuations.
  const served = new ServedWorkspaces(deps.pool, options.workspaces ?? {});
  await retryOnConnectionLoss(() => served.refresh(), { maxDelayMs: 5_000 });
  deps.servesWorkspace = (workspace) => served.has(workspace);
  await registerWorker(deps, workerId, heartbeatMs, served.list());
  const state: WorkerState = { stopping: false, activeJobs: 0 };
  // The queue's own pool, with the same timeouts as ours: a hung connection attempt must not
  // hold one of graphile's workers (and so a concurrency slot) for ever. Jobs hold no connection
  // while they run, so a few serve any concurrency.
  const queuePool = createPool(options.databaseUrl, {
    max: options.queuePoolSize ?? options.concurrency + 2,
    applicationName: "stepwise-queue",
  });
  // Every job a task of ours runs, and every runner's id: a job locked to one of our runners that
  // none of our tasks has in hand was never heard of here (queue-locks.ts, `freeJobsNotInHand`).
  const inHand = new JobsInHand();
  const runnerIds: string[] = [];
  // Recomputed when the served set changes: the routed tasks are those of the workspaces served now.
  const taskList = (): Record<string, QueueTask> =>
    Object.fromEntries(
      Object.entries({
        ...extra?.tasks,
        ...Object.fromEntries(
          Object.entries(extra?.workspaceTasks ?? {}).flatMap(([task, handler]) =>
            served.tasksOf(task).map((routed) => [routed, handler]),
          ),
        ),
        ...stepWorkerTasks(deps, state, served.stepTasks()),
      }).map(([task, handler]) => [task, inHand.track(handler)]),
    );
  const queue = { pool: queuePool, events: queueRunnerEvents(deps, workerId, runnerIds), taskList: taskList() };
  const runners = await superviseRunners(() => startQueueRunner(queue, options, state), state);
  const restartRunner = runners.restart;

  const heartbeat = startHeartbeat(options.databaseUrl, workerId, heartbeatMs);
  const leaseRenewal = startLeaseRenewal(deps, heartbeatMs, options.skipLeaseRenewal === true);
  const maintenance = startMaintenance(deps, state, {
    heartbeatMs,
    concurrency: options.concurrency,
    extra,
    restartRunner,
    stepTasks: () => served.stepTasks(),
    freeJobsNotInHand: () => freeJobsNotInHand(deps.pool, runnerIds, inHand, heartbeatMs * MISSED_BEATS * 4),
  });
  // A workspace registered, renamed or removed (a NOTIFY from server/plans/workspaces.ts), or a directory
  // appearing on this machine (the slow timer): serve the new set, with a runner listing its tasks.
  const workspaceWatch = watchServedWorkspaces(served, async () => {
    if (state.stopping) return;
    await served.record(workerId);
    queue.taskList = taskList();
    log.info({ workspaces: served.list() }, "serving a changed set of workspaces");
    await restartRunner("the workspaces it serves changed");
  });

  // Cancellation may be decided in another process; abort our in-flight steps of that run. The
  // listener reconnects after a dropped connection, so a cancel after a cut still stops commands.
  const listener = new DatabaseListener({
    databaseUrl: options.databaseUrl,
    channels: [CANCEL_CHANNEL, WORKSPACES_CHANNEL],
    onNotification: (channel, runId) => {
      if (channel === WORKSPACES_CHANNEL) workspaceWatch.check();
      else if (runId) abortRunLocally(deps, runId);
    },
  });
  await retryOnConnectionLoss(() => listener.start(), { maxDelayMs: 5_000 });
  // A workspace registered between the first resolution and the LISTEN above is seen now.
  workspaceWatch.check();

  const stop = async (graceMs: number) => {
    state.stopping = true;
    if (engine.localWorker === deps) engine.localWorker = undefined;
    await letJobsFinish(deps, state, extra, runners.current(), graceMs);
    deps.stopping = true;
    alarm.stop();
    heartbeat.clear();
    workspaceWatch.clear();
    leaseRenewal.clear();
    maintenance.clear();
    // A tick already under way finishes before the pools it uses are closed (by us, or by the
    // app right after this returns): cut off, it would report a failure that is only the stop.
    await Promise.all([maintenance.running(), leaseRenewal.running()]);
    // Our row is marked last: peers then see any step still marked running here as interrupted.
    // It stays, so a step's card can still say which worker ran it.
    await deps.pool.query("update workers set stopped_at = now() where id = $1", [workerId]).catch(() => undefined);
    await listener.close();
    await queuePool.end().catch(() => undefined);
    await heartbeat.close();
  };
  let stopped: Promise<void> | undefined;
  // Runs approved in this process start their first steps here from now on: the worker's row,
  // heartbeat and lease renewal exist, so its claims are recovered like any other's.
  engine.localWorker = deps;
  return {
    // Idempotent: shutdown paths (signal handlers, context close) may both stop the worker.
    stop(stopOptions) {
      stopped ??= stop(stopOptions?.graceMs ?? DEFAULT_GRACE_MS);
      return stopped;
    },
    id: workerId,
    servedWorkspaces: () => served.list(),
  };
}

interface StepWorkerOptions {
  databaseUrl: string;
  concurrency: number;
  heartbeatMs?: number;
  /** graphile-worker's pool (its share of the process's connection budget). */
  queuePoolSize?: number;
  /** The workspaces this worker serves (default: every registered one whose path exists here). */
  workspaces?: WorkspaceChoice;
  /** Fault injection for tests: beat, but never renew the leases of running attempts. */
  skipLeaseRenewal?: boolean;
  /** How often each idle queue worker polls (default `queuePollIntervalMs(concurrency)`). */
  queuePollIntervalMs?: number;
  extra?: (worker: { workerId: string; heartbeatMs: number }) => ExtraWork;
}

/** The worker's row, written once the database answers (it waits for it at start). */
async function registerWorker(
  deps: EngineDeps,
  workerId: string,
  heartbeatMs: number,
  workspaces: string[],
): Promise<void> {
  await retryOnConnectionLoss(
    () =>
      deps.pool.query("insert into workers (id, hostname, pid, heartbeat_ms, workspaces) values ($1, $2, $3, $4, $5)", [
        workerId,
        os.hostname(),
        process.pid,
        heartbeatMs,
        workspaces,
      ]),
    {
      maxDelayMs: 5_000,
      onRetry: (error, attempt) => {
        if (attempt === 1 || attempt % 10 === 0) log.warn({ err: String(error) }, "waiting for the database");
      },
    },
  );
}

/**
 * Each runner's id (graphile's `locked_by`) is recorded beside our heartbeat row, so peers free
 * the jobs it holds when this process dies (queue-locks.ts). Recorded as the runner is created,
 * as it starts taking jobs; a lock it takes before the row names it is freed later (see there).
 */
function queueRunnerEvents(deps: EngineDeps, workerId: string, runnerIds: string[]): WorkerEvents {
  const queueEvents: WorkerEvents = new EventEmitter();
  queueEvents.on("pool:create", ({ workerPool }) => {
    runnerIds.push(workerPool.id);
    retryOnConnectionLoss(() => recordQueueWorkerId(deps.pool, workerId, workerPool.id), {
      maxDelayMs: 5_000,
      shouldStop: () => deps.stopping === true,
    }).catch((error: unknown) => log.error({ err: String(error) }, "could not record the job runner's id"));
  });
  return queueEvents;
}

/** The engine's tasks on the queue: steps, and the timers of approvals and recovery. */
function stepWorkerTasks(deps: EngineDeps, state: WorkerState, stepTasks: string[]): Record<string, QueueTask> {
  const runStep: QueueTask = async (payload, helpers) => {
    state.activeJobs++;
    try {
      observeQueueLatency(helpers.job.run_at);
      await executeStepJob(deps, payload as { runId: string; stepId: string; attempt: number });
    } finally {
      state.activeJobs--;
    }
  };
  return {
    // One task per served workspace, and the workspace-free one: the same handler for all.
    ...Object.fromEntries(stepTasks.map((task) => [task, runStep])),
    [APPROVAL_WARNING_TASK]: async (payload) => {
      await warnApprovalExpiring(deps, payload as { runId: string; stepId: string; expiresAt: string });
    },
    [AUTO_RECOVERY_TASK]: async (payload) => {
      await deps.autoRecover?.(payload as { runId: string; stepId: string; attempt: number });
    },
    [APPROVAL_EXPIRY_TASK]: async (payload) => {
      await expireApproval(deps, payload as { runId: string; stepId: string; expiresAt: string });
    },
    [START_CHILD_RUN_TASK]: async (payload) => {
      await startChildRun(deps, payload as Parameters<typeof startChildRun>[1]);
    },
    [CHILD_RUN_FINISHED_TASK]: async (payload) => {
      await recordChildRunFinished(deps, payload as Parameters<typeof recordChildRunFinished>[1]);
    },
    [CANCEL_CHILD_RUNS_TASK]: async (payload) => {
      await cancelChildRuns(deps, payload as Parameters<typeof cancelChildRuns>[1]);
    },
  };
}

/**
 * The worker's job runner, replaced when it stops by itself (graphile stops its pool after a long
 * outage) or when asked (wedged, or the workspaces it serves changed). A stop under way stops the
 * runner it found; a runner started after that would hold the queue's pool open for ever (the
 * stop waits for that pool to end), so none is.
 */
async function superviseRunners(
  startRunner: () => Promise<Runner>,
  state: WorkerState,
): Promise<{ current(): Runner; restart(why: string): Promise<void> }> {
  let runner = await startRunner();
  const restart = async (why: string) => {
    if (state.stopping) return;
    log.warn({ why }, "restarting the job runner");
    const old = runner;
    const next = await startRunner();
    if (state.stopping) {
      // The stop began while this one started: it never takes a job.
      await next.stop().catch(() => undefined);
      return;
    }
    runner = next;
    supervise(runner);
    // The old runner may never finish stopping (that is why it is replaced); don't wait for it.
    void old.stop().catch(() => undefined);
  };
  const supervise = (current: Runner) => {
    current.promise
      .catch(() => undefined)
      .then(async () => {
        if (state.stopping || current !== runner) return;
        await restart("it stopped");
      })
      .catch((error: unknown) => log.error({ err: String(error) }, "could not restart the job runner"));
  };
  supervise(runner);
  return { current: () => runner, restart };
}

/**
 * Stops taking jobs and lets the ones in flight (and continuations) finish within `graceMs`; what
 * is still running then is aborted, and waited for until its processes are gone.
 */
async function letJobsFinish(
  deps: EngineDeps,
  state: WorkerState,
  extra: ExtraWork | undefined,
  runner: Runner,
  graceMs: number,
): Promise<void> {
  // Stop taking jobs; graphile lets the jobs it handed out finish. Continuations are ours to wait for.
  const runnerStopped = runner.stop().catch(() => undefined);
  const idle = async () => {
    await runnerStopped;
    // Jobs of a runner replaced earlier (see restartRunner) are not waited for by this one's stop.
    while (state.activeJobs > 0 || deps.continuationSlots!.used > 0) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  const timedOut = await Promise.race([
    idle().then(() => false),
    new Promise<boolean>((resolve) => setTimeout(() => resolve(true), graceMs).unref()),
  ]);
  if (timedOut) {
    extra?.abortAll?.();
    const aborted = abortAllLocally(deps);
    if (aborted > 0) log.warn({ aborted }, "shutdown grace period over: aborted the steps still running");
    // An aborted step ends once its processes are gone (see raceAbort); only then may this
    // worker's row say it stopped, which lets recovery queue the step again elsewhere.
    await Promise.race([idle(), new Promise((resolve) => setTimeout(resolve, ABORT_SETTLE_MS + 1_000).unref())]);
  }
}
