import { hasKind, markKind } from "../errors";
import { isDatabaseUnavailable, retryOnConnectionLoss } from "../database-faults";
import { logger } from "../logger";
import { observeStepDuration } from "../metrics/process-metrics";
import { RetryableToolError } from "../tools/types";
import { RunCombiner } from "./batching";
import type { ClaimedStep } from "./claim";
import type { EngineDeps } from "./deps";
import { ProgressReporter } from "./progress";
import type { Outcome } from "./outcome";
import type { StepJobRef } from "./run-transaction";

const log = logger.child({ component: "worker" });

/**
 * The body of a `run_step` job. Claims the step (ready → running), runs the tool outside any
 * transaction, then records the outcome and advances the run in one transaction.
 * A job whose step is no longer in the state it expects (cancelled, already done) does nothing.
 */
export async function executeStepJob(
  deps: EngineDeps,
  job: { runId: string; stepId: string; attempt: number },
): Promise<void> {
  const claimed = await combinerFor(deps).submit<ClaimedStep | undefined>(job.runId, { kind: "claim", job });
  if (claimed) await runClaimedStep(deps, claimed);
}

/** The longest pause between two tries at writing a step's outcome. */
const RECORD_MAX_DELAY_MS = 5_000;

/**
 * Runs a claimed step's tool outside any transaction, then records the outcome. `continuation`:
 * the step holds one of this process's continuation slots (see `claimContinuations`).
 */
async function runClaimedStep(deps: EngineDeps, claimed: ClaimedStep, continuation = false): Promise<void> {
  const { step, attempt, run } = claimed;
  // An execution is keyed by (run, step, attempt): the committed claim made this process its one
  // executor, and one already executing here means this start is a duplicate, never a second run.
  const leaseKey = `${run.id}/${step.id}/${attempt}`;
  if (deps.inFlight?.has(leaseKey)) {
    log.error({ runId: run.id, stepId: step.id, attempt }, "refused to execute an attempt already executing here");
    return;
  }
  const controller = new AbortController();
  const inFlight = deps.cancellations.get(run.id) ?? new Set();
  inFlight.add(controller);
  deps.cancellations.set(run.id, inFlight);
  // Leased until the outcome is written, not only while the tool runs: a peer must not take a
  // step whose result is on its way.
  deps.inFlight?.set(leaseKey, { runId: run.id, stepId: step.id, attempt, controller });
  try {
    await executeAndRecord(deps, claimed, controller, inFlight, continuation);
  } finally {
    deps.inFlight?.delete(leaseKey);
  }
}

async function executeAndRecord(
  deps: EngineDeps,
  claimed: ClaimedStep,
  controller: AbortController,
  inFlight: Set<AbortController>,
  continuation: boolean,
): Promise<void> {
  const { step, attempt, run } = claimed;
  const job = { runId: run.id, stepId: step.id, attempt };
  const started = Date.now();
  const timeout = setTimeout(
    () => controller.abort(new StepTimeoutError(`Timed out after ${step.timeoutSeconds}s`)),
    step.timeoutSeconds * 1000,
  );
  const reporter = new ProgressReporter(deps.pool, run, step.id, attempt, deps.workerId);
  let outcome: Outcome;
  /** Whether an aborted tool settled — its processes gone — within ABORT_SETTLE_MS. */
  let settledAfterAbort = true;
  try {
    const tool = deps.tools.get(step.tool);
    if (!tool) throw new Error(deps.tools.missingReason?.(step.tool) ?? `Unknown tool: ${step.tool}`);
    const input = tool.inputSchema.parse(claimed.args);
    const value = await raceAbort(
      tool.execute(input, {
        signal: controller.signal,
        workspaceRoot: run.workspace_root,
        runId: run.id,
        stepId: step.id,
        attempt,
        // One key per step across attempts: a retried or replayed step presents the same key.
        idempotencyKey: `${run.id}:${step.id}`,
        effectsStarting: () => markEffectsStarted(deps, job, controller.signal),
        approvedByPerson: claimed.approvedByPerson === true,
        reportProgress: (percent, message) => reporter.progress(percent, message),
        log: (message, level) => reporter.log(message, level ?? "info"),
      }),
      controller.signal,
    );
    outcome = { ok: true, value: value === undefined ? null : value };
  } catch (error) {
    if (error instanceof AbortNotSettledError) settledAfterAbort = false;
    const reason = controller.signal.aborted ? controller.signal.reason : error;
    // An aborted command says which processes its stop killed; that stays with the attempt.
    const stopReport = controller.signal.aborted
      ? (error as { stopReport?: unknown } | undefined)?.stopReport
      : undefined;
    const message = errorMessage(reason) + (typeof stopReport === "string" ? ` (${stopReport})` : "");
    if (typeof stopReport === "string") log.info({ runId: run.id, stepId: step.id, attempt }, stopReport);
    outcome = {
      ok: false,
      error: message,
      retryable: isRetryable(reason),
      ...(reason instanceof DatabaseWaitError && { waitingForDatabase: true }),
    };
  } finally {
    clearTimeout(timeout);
    inFlight.delete(controller);
    if (inFlight.size === 0) deps.cancellations.delete(run.id);
    await reporter.close();
  }
  if (controller.signal.reason instanceof WorkerShutdownError) {
    // A gentle stop fails nothing: the attempt's processes are known to be gone, so the same
    // attempt is given back to run again at the next start (or on another worker at once).
    // A tool that did not stop in time is not an outcome: the step stays running under this
    // worker, whose row goes away with it, so recovery decides as after a crash.
    if (!settledAfterAbort) return;
    outcome = {
      ok: false,
      error: "Interrupted: the worker stopped while it ran; it runs again",
      retryable: true,
      interrupted: true,
    };
  }
  const duration = Date.now() - started;
  observeStepDuration(step.tool, outcome.ok, duration);
  // The outcome is written, whatever it takes: given up, the step would stay running under a worker
  // that is alive, so no recovery would ever look at it. Only a process going away stops trying;
  // its steps are then recovered as interrupted once its heartbeat ends.
  for (let tries = 1; ; tries++) {
    try {
      await combinerFor(deps).submit<void>(job.runId, {
        kind: "record",
        job,
        attempt,
        outcome,
        duration,
        heldSlot: continuation,
      });
      return;
    } catch (error) {
      if (deps.stopping) throw error;
      if (tries === 1 || tries % 10 === 0) {
        log.error(
          { runId: run.id, stepId: step.id, attempt, tries, err: error },
          "writing a step's outcome failed; trying again",
        );
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(RECORD_MAX_DELAY_MS, 100 * 2 ** tries)));
    }
  }
}

/** How long a step waits for the database before its command starts, before it gives its turn back. */
export const EFFECT_START_DATABASE_WAIT_MS = 10_000;

/**
 * The database could not be reached (or was full) before the step's command started: nothing ran.
 * The step goes back to ready and the same attempt is made again later (see `recordOutcomeIn`);
 * a full database is a wait, not a failure, and costs none of the step's retries.
 */
export class DatabaseWaitError extends Error {
  constructor(cause: unknown) {
    super(`The database could not be reached before the command started (${errorMessage(cause)}); trying again`, {
      cause,
    });
  }
}

/**
 * Records that a step's side effect begins now, before it does: recovery can then tell a step that
 * was interrupted before its command started (safe to run again) from one that may have run. A cut
 * connection or a full server is waited out for a while; the effect does not start unrecorded, and
 * a longer outage gives the step back (`DatabaseWaitError`). A step no longer running this attempt
 * here (cancelled, recovered elsewhere) must not start it at all.
 */
async function markEffectsStarted(deps: EngineDeps, job: StepJobRef, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  const giveUpAt = Date.now() + EFFECT_START_DATABASE_WAIT_MS;
  const marked = await retryOnConnectionLoss(
    () =>
      deps.pool.query(
        `update run_steps set effects_started_at = coalesce(effects_started_at, now())
         where run_id = $1 and step_id = $2 and attempt = $3 and status = 'running'
           and worker_id is not distinct from $4`,
        [job.runId, job.stepId, job.attempt, deps.workerId ?? null],
      ),
    { shouldStop: () => signal.aborted || deps.stopping === true || Date.now() > giveUpAt },
  ).catch((error: unknown) => {
    if (!signal.aborted && !deps.stopping && isDatabaseUnavailable(error)) throw new DatabaseWaitError(error);
    throw error;
  });
  signal.throwIfAborted();
  if (marked.rowCount === 0) throw new Error("The step is no longer running here; its command was not started");
}

const combiners = new WeakMap<EngineDeps, RunCombiner>();
function combinerFor(deps: EngineDeps): RunCombiner {
  let combiner = combiners.get(deps);
  if (!combiner)
    combiners.set(deps, (combiner = new RunCombiner(deps, (claimed) => void runContinuation(deps, claimed))));
  return combiner;
}

/** Runs steps this process claimed as continuations (their claims committed), each in its slot. */
export function startContinuations(deps: EngineDeps, claimed: ClaimedStep[]): void {
  const run = claimed[0]?.run;
  // Their outcomes go through the combiner: knowing the run's plan version, its first transaction
  // on the run reads the step statuses it needs with the lock rather than after it.
  if (run) combinerFor(deps).remember(run.id, { planId: run.plan_id, version: run.plan_version });
  for (const step of claimed) void runContinuation(deps, step);
}

async function runContinuation(deps: EngineDeps, claimed: ClaimedStep): Promise<void> {
  try {
    await runClaimedStep(deps, claimed, true);
  } catch (error) {
    // The step stays running under this worker; recovery re-queues it if this process goes away.
    log.error({ runId: claimed.run.id, stepId: claimed.step.id, err: error }, "step continuation failed");
  } finally {
    deps.continuationSlots!.used--;
  }
}

class StepTimeoutError extends Error {}

/** An aborted tool that had not settled (its processes not known to be gone) when the wait ended. */
class AbortNotSettledError extends Error {
  constructor(readonly reason: unknown) {
    super(errorMessage(reason));
  }
}

/**
 * The abort reason for steps still running when a worker's shutdown grace period ends. A step
 * started from a web route runs in the server bundle's copy of this module while the CLI's
 * worker aborts it, so `instanceof` asks for the mark, not the class (see markKind).
 */
export class WorkerShutdownError extends Error {
  static [Symbol.hasInstance](value: unknown): boolean {
    return hasKind(value, "WorkerShutdownError");
  }

  constructor() {
    super("The worker shut down while the step ran");
    markKind(this, "WorkerShutdownError");
  }
}

/** Aborts every step this process is running (shutdown after the grace period). */
export function abortAllLocally(deps: EngineDeps): number {
  let aborted = 0;
  for (const controllers of deps.cancellations.values()) {
    for (const controller of controllers) {
      controller.abort(new WorkerShutdownError());
      aborted++;
    }
  }
  return aborted;
}

function isRetryable(error: unknown): boolean {
  if (error instanceof RetryableToolError || error instanceof StepTimeoutError) return true;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return (
    code !== undefined && ["ECONNRESET", "ECONNREFUSED", "ETIMEDOUT", "EAI_AGAIN", "EBUSY", "EPIPE"].includes(code)
  );
}

export function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/**
 * How long an aborted tool gets to settle (a shell command: to be SIGKILLed and gone) before the
 * attempt ends without it. Within it, nothing that follows the abort — a retry, recovery after a
 * shutdown — starts beside the old attempt.
 */
export const ABORT_SETTLE_MS = 15_000;

/**
 * Settles with the tool, and on abort once the tool has settled too (its processes are gone), but
 * no later than ABORT_SETTLE_MS after it: a tool that ignores its abort signal still cannot hold
 * the step past its timeout for ever.
 */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  const settledWork = work.then(
    () => undefined,
    (error: unknown) => error,
  );
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise<"late">(
        (resolveLate) => (timer = setTimeout(() => resolveLate("late"), ABORT_SETTLE_MS)),
      );
      void Promise.race([settledWork, late]).then((result) => {
        clearTimeout(timer);
        if (result === "late") {
          log.error("an aborted tool had not settled after its stop wait; its attempt ends anyway");
          return reject(new AbortNotSettledError(signal.reason));
        }
        reject(result instanceof Error && result !== signal.reason ? result : signal.reason);
      });
    };
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/** Aborts this process's in-flight steps of a cancelled run. */
export function abortRunLocally(deps: EngineDeps, runId: string): void {
  for (const controller of deps.cancellations.get(runId) ?? []) controller.abort(new Error("Run cancelled"));
}
