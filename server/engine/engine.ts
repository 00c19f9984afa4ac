import { randomUUID } from "node:crypto";
import type pg from "pg";
import { inTransaction, retryOnConnectionLoss } from "../db";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import type { NewEvent } from "../events/types";
import { ReferenceError, resolveReferences } from "../plans/references";
import type { Step, StepResult, StepStatus } from "../plans/schema";
import { validatePlan } from "../plans/validate";
import type { ToolRegistry } from "../tools/registry";
import { RetryableToolError } from "../tools/types";
import { RunGraphCache, type RunGraph } from "./graph";
import {
  APPROVAL_EXPIRY_TASK,
  APPROVAL_WARNING_TASK,
  enqueueApprovalTimers,
  enqueueStepJobs,
  type ApprovalTimerJob,
  type StepJob,
  CANCEL_CHANNEL,
} from "./queue";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { askUserInputSchema } from "../tools/ask-user";
import { raiseFailureSignal } from "../agents/signal-store";
import { decidePending, freeSlots, retryDelayMs, type GraphStep } from "./scheduler";
import { FINISHED_RUN_STATUSES, type RunStatus } from "./state-machine";

type Client = pg.PoolClient;

export interface EngineDeps {
  pool: pg.Pool;
  tools: ToolRegistry;
  graphs: RunGraphCache;
  /** Aborts in-flight steps of runs cancelled from this or another process. */
  cancellations: Map<string, Set<AbortController>>;
  /** Set in worker processes: recorded on claimed steps so recovery knows whose they are. */
  workerId?: string;
  /** Set in worker processes: host and pid, told on `step.running` so a person sees who runs a step. */
  workerName?: string;
  /**
   * Worker processes only: how many steps this process may run as continuations — dependents it
   * claims itself in the transaction that made them ready, skipping a queue round trip.
   */
  continuationSlots?: { limit: number; used: number };
  /** Set when the process shuts down: transactions stop retrying lost connections. */
  stopping?: boolean;
  /**
   * Worker processes only: how long a claimed attempt's lease lasts without renewal, and the
   * attempts this process is executing (or still recording), whose leases its heartbeat renews.
   */
  leaseMs?: number;
  inFlight?: Map<string, { runId: string; stepId: string; attempt: number; controller: AbortController }>;
  /**
   * Fault injection for tests: called inside each step transaction (claims and outcomes) after its
   * work, before it commits, e.g. to freeze the process while it holds the run's lock.
   */
  beforeCommit?: (runId: string, ops: readonly { kind: "claim" | "record"; job: { stepId: string } }[]) => void;
  now?: () => Date;
  random?: () => number;
}

export function createEngineDeps(pool: pg.Pool, tools: ToolRegistry): EngineDeps {
  return { pool, tools, graphs: new RunGraphCache(), cancellations: new Map() };
}

interface RunRow {
  id: string;
  plan_id: string;
  plan_version: number;
  status: RunStatus;
  max_parallel: number;
  trace_id: string;
  workspace_root: string;
  open_steps: number;
  active_steps: number;
  approval_timeout_ms: number;
  approval_warning_ms: number;
  /** The database's clock at the start of the transaction. */
  db_now: Date;
}

/**
 * What a step in awaiting_approval, awaiting_input or awaiting_agent waits for — or, for an agent
 * task in progress, which agent holds it. Shown to people and checked by timers.
 */
export type StepWaiting =
  | { kind: "approval"; expiresAt: string }
  | { kind: "input"; question: string; choices?: string[] }
  | { kind: "agent"; agent?: string; since?: string };

/** Everything one engine transaction knows and changes about a run; written back once at the end. */
class RunTransaction {
  readonly events: NewEvent[] = [];
  readonly jobs: StepJob[] = [];
  readonly timers: ApprovalTimerJob[] = [];
  readonly statuses = new Map<string, StepStatus>();
  /** Final results, written with the status changes in one statement. */
  private readonly results = new Map<string, StepResult>();
  private readonly updates = new Map<
    string,
    { status: StepStatus; reason?: string | null; waiting: StepWaiting | null }
  >();

  constructor(
    readonly client: Client,
    readonly run: RunRow,
    /** Replaced only when a recovery moves the run to a new plan version. */
    public graph: RunGraph,
    /**
     * "Now" for every time decision of this transaction — approval expiry, retry backoff, result
     * and event timestamps: the database's clock, so a worker whose own clock is off cannot
     * expire a gate early or stamp events out of order.
     */
    readonly now: Date,
  ) {}

  setStatus(
    stepId: string,
    status: StepStatus,
    reason?: string,
    data: Record<string, unknown> = {},
    waiting: StepWaiting | null = null,
  ): void {
    this.statuses.set(stepId, status);
    this.updates.set(stepId, { status, reason: reason ?? null, waiting });
    this.events.push({ type: `step.${status}`, stepId, data: { status, ...(reason && { reason }), ...data } });
  }

  setResult(stepId: string, result: StepResult): void {
    this.results.set(stepId, result);
  }

  async loadStatuses(stepIds: Iterable<string>): Promise<void> {
    const missing = [...new Set(stepIds)].filter((id) => !this.statuses.has(id));
    if (missing.length === 0) return;
    const rows = await this.client.query<{ step_id: string; status: StepStatus }>(
      "select step_id, status from run_steps where run_id = $1 and step_id = any($2)",
      [this.run.id, missing],
    );
    for (const row of rows.rows) this.statuses.set(row.step_id, row.status);
  }

  /** Writes step status changes made so far, so that queries in this transaction see them. */
  async flushStatusesOnly(): Promise<void> {
    if (this.results.size > 0) {
      await this.client.query(
        `update run_steps rs set result = u.result, error = u.result->>'error',
           progress = case when (u.result->>'ok')::boolean then 100 else rs.progress end
         from jsonb_to_recordset($2::jsonb) as u(step_id text, result jsonb)
         where rs.run_id = $1 and rs.step_id = u.step_id`,
        [this.run.id, JSON.stringify([...this.results].map(([step_id, result]) => ({ step_id, result })))],
      );
      this.results.clear();
    }
    if (this.updates.size > 0) {
      await this.client.query(
        `update run_steps rs set status = u.status, reason = coalesce(u.reason, rs.reason), waiting = u.waiting,
           finished_at = case when u.status in ('completed','failed','blocked','skipped','cancelled') then now() else rs.finished_at end
         from jsonb_to_recordset($2::jsonb) as u(step_id text, status text, reason text, waiting jsonb)
         where rs.run_id = $1 and rs.step_id = u.step_id`,
        [this.run.id, JSON.stringify([...this.updates].map(([step_id, u]) => ({ step_id, ...u })))],
      );
      this.updates.clear();
    }
  }

  async flush(): Promise<void> {
    await this.flushStatusesOnly();
    await this.client.query(
      `update runs set status = $2, open_steps = $3, active_steps = $4,
         finished_at = case when $2 in ('completed','failed','cancelled') then coalesce(finished_at, now()) else null end
       where id = $1`,
      [this.run.id, this.run.status, this.run.open_steps, this.run.active_steps],
    );
    await enqueueStepJobs(this.client, this.jobs.splice(0));
    await enqueueApprovalTimers(this.client, this.timers.splice(0));
    await appendEvents(
      this.client,
      { streamId: this.run.id, planId: this.run.plan_id, runId: this.run.id, traceId: this.run.trace_id },
      this.events.splice(0),
    );
  }
}

async function loadPlanSteps(client: Pick<pg.ClientBase, "query">, planId: string, version: number): Promise<Step[]> {
  const row = await client.query<{ steps: Step[] }>(
    "select steps from plan_versions where plan_id = $1 and version = $2",
    [planId, version],
  );
  if (row.rowCount === 0) throw new AppError("not_found", `Plan ${planId} has no version ${version}`);
  return row.rows[0]!.steps;
}

/**
 * Locks the run row: every engine transaction on a run is serialised by this lock. With
 * `skipLocked` a run whose lock is held elsewhere is not waited for (undefined, as for no run).
 */
async function openRunTransaction(
  deps: EngineDeps,
  client: Client,
  runId: string,
  options: { skipLocked?: boolean } = {},
): Promise<RunTransaction | undefined> {
  const result = await client.query<RunRow>(
    `select id, plan_id, plan_version, status, max_parallel, trace_id, workspace_root, open_steps, active_steps,
            approval_timeout_ms, approval_warning_ms, now() as db_now
     from runs where id = $1 for update${options.skipLocked ? " skip locked" : ""}`,
    [runId],
  );
  const run = result.rows[0];
  if (!run) return undefined;
  const graph = await deps.graphs.get(run.plan_id, run.plan_version, () =>
    loadPlanSteps(client, run.plan_id, run.plan_version),
  );
  return new RunTransaction(client, run, graph, deps.now?.() ?? run.db_now);
}

/**
 * Propagates the consequences of steps that just settled: dependents become ready, wait for
 * approval, are blocked or skipped — transitively — then free slots are filled and the run is
 * finished when nothing is left open.
 */
async function advance(tx: RunTransaction, settled: string[], alsoConsider: string[] = []): Promise<void> {
  let frontier = settled;
  let extra = alsoConsider;
  while (frontier.length > 0 || extra.length > 0) {
    const candidates = [...new Set([...extra, ...frontier.flatMap((id) => tx.graph.dependents.get(id) ?? [])])];
    extra = [];
    await tx.loadStatuses(candidates.flatMap((id) => [id, ...tx.graph.steps.get(id)!.dependsOn]));
    const next: string[] = [];
    for (const id of candidates) {
      if (tx.statuses.get(id) !== "pending") continue;
      const decision = decidePending(tx.graph.steps.get(id)!, (dep) => tx.statuses.get(dep));
      if (decision.kind === "wait") continue;
      if (decision.kind === "blocked" || decision.kind === "skipped") {
        tx.setStatus(id, decision.kind, decision.reason);
        tx.run.open_steps--;
        next.push(id);
      } else if (decision.kind === "awaiting_approval") {
        requestApproval(tx, id);
      } else {
        makeReady(tx, id);
      }
    }
    frontier = next;
  }
  await dispatch(tx);
  await finishIfDone(tx);
}

/**
 * A step whose turn has come: a tool step is ready for a worker; an agent task waits for an agent
 * instead and never enters the queue, so it holds no parallelism slot while nobody works on it.
 */
function makeReady(tx: RunTransaction, stepId: string): void {
  if (tx.graph.steps.get(stepId)!.tool === AGENT_TASK_TOOL) {
    tx.setStatus(stepId, "awaiting_agent", undefined, {}, { kind: "agent" });
  } else {
    tx.setStatus(stepId, "ready");
  }
}

/**
 * A gated step waits for a person. It expires after the run's approval timeout (skipped with the
 * reason), and an `approval.expiring` event warns some minutes before so the UI can say so.
 */
function requestApproval(tx: RunTransaction, stepId: string, now = tx.now): void {
  const { approval_timeout_ms: timeoutMs, approval_warning_ms: warningMs } = tx.run;
  const expiresAt = new Date(now.getTime() + timeoutMs).toISOString();
  tx.setStatus(stepId, "awaiting_approval", undefined, { expiresAt }, { kind: "approval", expiresAt });
  tx.events.push({
    type: "approval.requested",
    stepId,
    data: { planVersion: tx.run.plan_version, expiresAt },
  });
  const timer = { runId: tx.run.id, stepId, expiresAt };
  tx.timers.push({ ...timer, task: APPROVAL_EXPIRY_TASK, runAt: new Date(expiresAt) });
  if (warningMs > 0 && warningMs < timeoutMs) {
    tx.timers.push({ ...timer, task: APPROVAL_WARNING_TASK, runAt: new Date(now.getTime() + timeoutMs - warningMs) });
  }
}

/** Queues ready steps, in plan order, up to the run's parallelism limit. */
async function dispatch(tx: RunTransaction): Promise<void> {
  if (tx.run.status !== "running") return;
  const slots = freeSlots(tx.run.max_parallel, tx.run.active_steps);
  if (slots === 0) return;
  // Steps made ready in this transaction are not in the table yet.
  await tx.flushStatusesOnly();
  const ready = await tx.client.query<{ step_id: string; attempt: number }>(
    `update run_steps set queued = true where run_id = $1 and step_id in (
       select step_id from run_steps where run_id = $1 and status = 'ready' and not queued order by position limit $2
     ) returning step_id, attempt`,
    [tx.run.id, slots],
  );
  for (const row of ready.rows) {
    tx.jobs.push({ runId: tx.run.id, stepId: row.step_id, attempt: row.attempt + 1 });
  }
  tx.run.active_steps += ready.rows.length;
}

async function finishIfDone(tx: RunTransaction): Promise<void> {
  const { run } = tx;
  if (run.status === "completed" || run.status === "failed" || run.status === "cancelled") return;
  if (run.status === "failing" && run.active_steps === 0) {
    await cancelOpenSteps(tx, "A critical step failed");
    run.status = "failed";
    tx.events.push({ type: "run.failed", data: { status: "failed", reason: "A critical step failed" } });
    return;
  }
  if (run.open_steps > 0) return;
  // Statuses set in this transaction must be visible to the query (dispatch, which usually
  // writes them first, does nothing in a paused run).
  await tx.flushStatusesOnly();
  const failed = await tx.client.query(
    "select 1 from run_steps where run_id = $1 and status in ('failed','blocked') limit 1",
    [run.id],
  );
  run.status = failed.rowCount ? "failed" : "completed";
  tx.events.push({ type: `run.${run.status}`, data: { status: run.status } });
}

async function cancelOpenSteps(tx: RunTransaction, reason: string): Promise<void> {
  await tx.flushStatusesOnly();
  const open = await tx.client.query<{ step_id: string }>(
    `select step_id from run_steps where run_id = $1
       and status in ('pending','ready','awaiting_approval','awaiting_input','awaiting_agent','running') order by position`,
    [tx.run.id],
  );
  for (const row of open.rows) tx.setStatus(row.step_id, "cancelled", reason);
  tx.run.open_steps -= open.rows.length;
}

export interface StartRunInput {
  planId: string;
  version: number;
  actor: string;
  workspaceRoot: string;
  maxParallel?: number;
  /** How long gated steps wait for a decision (default 30 minutes) and when to warn before. */
  approvalTimeoutMs?: number;
  approvalWarningMs?: number;
  /** Re-run: these steps are not executed again; their recorded results are copied from `fromRunId`. */
  reuse?: { fromRunId: string; stepIds: string[] };
}

export const DEFAULT_APPROVAL_TIMEOUT_MS = 30 * 60_000;
export const DEFAULT_APPROVAL_WARNING_MS = 5 * 60_000;

/** Approving a plan version starts a run of exactly that version. */
export async function startRun(deps: EngineDeps, input: StartRunInput): Promise<{ runId: string; traceId: string }> {
  const runId = randomUUID();
  // One trace per plan: its versions, its events and every run of it share the plan's trace id,
  // so one id finds everything (seed 001's observability).
  let traceId = "";
  await inTransaction(deps.pool, async (client) => {
    const trace = await client.query<{ trace_id: string }>(
      "select trace_id from plan_versions where plan_id = $1 and version = $2",
      [input.planId, input.version],
    );
    traceId = trace.rows[0]?.trace_id ?? randomUUID();
    const steps = await loadPlanSteps(client, input.planId, input.version);
    const issues = validatePlan({ steps }, deps.tools);
    if (issues.length > 0) throw new AppError("invalid_plan", "The plan is not valid and cannot run", issues);
    const reused = new Set(input.reuse?.stepIds);
    const initial: StepStatus[] = steps.map((step) =>
      reused.has(step.id) ? "completed" : step.skipped ? "skipped" : "pending",
    );
    await client.query(
      `insert into runs (id, plan_id, plan_version, status, max_parallel, trace_id, approved_by, workspace_root,
                         open_steps, active_steps, started_at, approval_timeout_ms, approval_warning_ms, rerun_of)
       values ($1, $2, $3, 'running', $4, $5, $6, $7, $8, 0, now(), $9, $10, $11)`,
      [
        runId,
        input.planId,
        input.version,
        input.maxParallel ?? 8,
        traceId,
        input.actor,
        input.workspaceRoot,
        initial.filter((s) => s === "pending").length,
        input.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS,
        input.approvalWarningMs ?? DEFAULT_APPROVAL_WARNING_MS,
        input.reuse?.fromRunId ?? null,
      ],
    );
    await client.query(
      `insert into run_steps (run_id, step_id, position, tool, status, depends_on, reason)
       select $1, s.id, s.position, s.tool, s.status, s.depends_on, s.reason
       from jsonb_to_recordset($2::jsonb) as s(id text, position int, tool text, status text, depends_on text[], reason text)`,
      [
        runId,
        JSON.stringify(
          steps.map((step, index) => ({
            id: step.id,
            position: index,
            tool: step.tool,
            status: initial[index],
            depends_on: step.dependsOn,
            reason: reused.has(step.id)
              ? `Result reused from run ${input.reuse!.fromRunId}`
              : step.skipped
                ? "Skipped by the reviewer"
                : null,
          })),
        ),
      ],
    );
    if (input.reuse && reused.size > 0) {
      // Only results that succeeded are reused; anything else would make the new run lie.
      const copied = await client.query(
        `update run_steps rs set result = old.result, attempt = old.attempt, progress = 100,
           started_at = old.started_at, finished_at = old.finished_at
         from run_steps old
         where rs.run_id = $1 and old.run_id = $2 and old.step_id = rs.step_id and rs.step_id = any($3)
           and old.status = 'completed' and (old.result->>'ok')::boolean`,
        [runId, input.reuse.fromRunId, [...reused]],
      );
      if (copied.rowCount !== reused.size) {
        throw new AppError("invalid_state", "Only completed steps of the earlier run can be reused");
      }
    }
    const tx = (await openRunTransaction(deps, client, runId))!;
    await audit(tx, input.actor, "plan.approved", null);
    tx.events.push({
      type: "run.started",
      data: {
        status: "running",
        planVersion: input.version,
        approvedBy: input.actor,
        ...(input.reuse && { rerunOf: input.reuse.fromRunId }),
        steps: steps.map((s, index) => ({ id: s.id, status: initial[index] })),
      },
    });
    steps.forEach((step, index) => tx.statuses.set(step.id, initial[index]!));
    // Roots have no dependencies to wait for; evaluate them like any dependent.
    const roots = steps.filter((s, index) => initial[index] === "pending" && s.dependsOn.length === 0).map((s) => s.id);
    await advance(
      tx,
      steps.filter((s, index) => initial[index] !== "pending").map((s) => s.id),
      roots,
    );
    await tx.flush();
  });
  return { runId, traceId };
}

interface ClaimedStep {
  step: Step;
  attempt: number;
  args: unknown;
  run: RunRow;
}

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

/** Runs a claimed step's tool outside any transaction, then records the outcome. */
async function runClaimedStep(deps: EngineDeps, claimed: ClaimedStep): Promise<void> {
  const { step, attempt, run } = claimed;
  const controller = new AbortController();
  const inFlight = deps.cancellations.get(run.id) ?? new Set();
  inFlight.add(controller);
  deps.cancellations.set(run.id, inFlight);
  // Leased until the outcome is written, not only while the tool runs: a peer must not take a
  // step whose result is on its way.
  const leaseKey = `${run.id}/${step.id}/${attempt}`;
  deps.inFlight?.set(leaseKey, { runId: run.id, stepId: step.id, attempt, controller });
  try {
    await executeAndRecord(deps, claimed, controller, inFlight);
  } finally {
    deps.inFlight?.delete(leaseKey);
  }
}

async function executeAndRecord(
  deps: EngineDeps,
  claimed: ClaimedStep,
  controller: AbortController,
  inFlight: Set<AbortController>,
): Promise<void> {
  const { step, attempt, run } = claimed;
  const job = { runId: run.id, stepId: step.id, attempt };
  const started = Date.now();
  const timeout = setTimeout(
    () => controller.abort(new StepTimeoutError(`Timed out after ${step.timeoutSeconds}s`)),
    step.timeoutSeconds * 1000,
  );
  const reporter = new ProgressReporter(deps.pool, run, step.id);
  let outcome: { ok: true; value: unknown } | { ok: false; error: string; retryable: boolean };
  try {
    const tool = deps.tools.get(step.tool);
    if (!tool) throw new Error(`Unknown tool: ${step.tool}`);
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
        reportProgress: (percent, message) => reporter.progress(percent, message),
        log: (message, level) => reporter.log(message, level ?? "info"),
      }),
      controller.signal,
    );
    outcome = { ok: true, value: value === undefined ? null : value };
  } catch (error) {
    const reason = controller.signal.aborted ? controller.signal.reason : error;
    outcome = { ok: false, error: errorMessage(reason), retryable: isRetryable(reason) };
  } finally {
    clearTimeout(timeout);
    inFlight.delete(controller);
    if (inFlight.size === 0) deps.cancellations.delete(run.id);
    await reporter.close();
  }
  // Not an outcome: the step stays running under this worker, whose row goes away with it, so
  // recovery decides (queue again if idempotent, else ask the person) as after a crash.
  if (controller.signal.reason instanceof WorkerShutdownError) return;
  const duration = Date.now() - started;
  // The outcome is written, whatever it takes: given up, the step would stay running under a worker
  // that is alive, so no recovery would ever look at it. Only a process going away stops trying;
  // its steps are then recovered as interrupted once its heartbeat ends.
  for (let tries = 1; ; tries++) {
    try {
      await combinerFor(deps).submit<void>(job.runId, { kind: "record", job, attempt, outcome, duration });
      return;
    } catch (error) {
      if (deps.stopping) throw error;
      if (tries === 1 || tries % 10 === 0) {
        console.error(
          `[worker] writing the outcome of ${step.id} of run ${run.id} failed (try ${tries}), trying again: ${errorMessage(error)}`,
        );
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(RECORD_MAX_DELAY_MS, 100 * 2 ** tries)));
    }
  }
}

/**
 * Records that a step's side effect begins now, before it does: recovery can then tell a step that
 * was interrupted before its command started (safe to run again) from one that may have run. A cut
 * connection is waited out; the effect does not start unrecorded. A step no longer running this
 * attempt here (cancelled, recovered elsewhere) must not start it at all.
 */
async function markEffectsStarted(deps: EngineDeps, job: StepJobRef, signal: AbortSignal): Promise<void> {
  signal.throwIfAborted();
  const marked = await retryOnConnectionLoss(
    () =>
      deps.pool.query(
        `update run_steps set effects_started_at = coalesce(effects_started_at, now())
         where run_id = $1 and step_id = $2 and attempt = $3 and status = 'running'
           and worker_id is not distinct from $4`,
        [job.runId, job.stepId, job.attempt, deps.workerId ?? null],
      ),
    { shouldStop: () => signal.aborted || deps.stopping === true },
  );
  signal.throwIfAborted();
  if (marked.rowCount === 0) throw new Error("The step is no longer running here; its command was not started");
}

type StepJobRef = { runId: string; stepId: string; attempt: number };
type EngineOp =
  | { kind: "claim"; job: StepJobRef }
  | { kind: "record"; job: StepJobRef; attempt: number; outcome: Outcome; duration: number };

/**
 * Every engine transaction on a run holds the run's row lock, so under load a process's claims and
 * completions on one run would queue for it one by one. The combiner instead runs one transaction
 * per run at a time and hands it everything that arrived meanwhile: many claims and outcomes share
 * one lock acquisition, one status read, one dispatch and one event append. With no contention a
 * request runs at once, so it adds no latency.
 */
class RunCombiner {
  private readonly pending = new Map<
    string,
    { op: EngineOp; resolve: (value: unknown) => void; reject: (error: unknown) => void }[]
  >();
  private readonly busy = new Set<string>();

  constructor(private readonly deps: EngineDeps) {}

  submit<T>(runId: string, op: EngineOp): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queue = this.pending.get(runId) ?? [];
      queue.push({ op, resolve: resolve as (value: unknown) => void, reject });
      this.pending.set(runId, queue);
      if (!this.busy.has(runId)) void this.drain(runId);
    });
  }

  private async drain(runId: string): Promise<void> {
    this.busy.add(runId);
    try {
      for (let batch = this.take(runId); batch.length > 0; batch = this.take(runId)) {
        try {
          // A lost connection rolls the batch back; every op re-checks state, so it is retried
          // whole until written — a finished step must not stay "running" because of a cut.
          const { results, continuations } = await retryOnConnectionLoss(() => this.attempt(runId, batch), {
            shouldStop: () => this.deps.stopping === true,
          });
          batch.forEach((entry, index) => {
            const result = results[index]!;
            if (result.ok) entry.resolve(result.value);
            else entry.reject(result.error);
          });
          // Only now, with the claims committed, are the continuations this process's to run.
          for (const claimed of continuations) void runContinuation(this.deps, claimed);
        } catch (error) {
          for (const entry of batch) entry.reject(error);
        }
      }
    } finally {
      this.busy.delete(runId);
    }
  }

  private async attempt(runId: string, batch: { op: EngineOp }[]) {
    const reserved: ClaimedStep[] = [];
    try {
      const ops = batch.map((entry) => entry.op);
      const results = await inTransaction(this.deps.pool, async (client) => {
        const results = await processOps(this.deps, client, runId, ops, reserved);
        this.deps.beforeCommit?.(runId, ops);
        return results;
      });
      return { results, continuations: reserved };
    } catch (error) {
      // The claims rolled back: give their continuation slots back.
      if (this.deps.continuationSlots) this.deps.continuationSlots.used -= reserved.length;
      throw error;
    }
  }

  private take(runId: string) {
    const batch = this.pending.get(runId) ?? [];
    this.pending.delete(runId);
    return batch;
  }
}

const combiners = new WeakMap<EngineDeps, RunCombiner>();
function combinerFor(deps: EngineDeps): RunCombiner {
  let combiner = combiners.get(deps);
  if (!combiner) combiners.set(deps, (combiner = new RunCombiner(deps)));
  return combiner;
}

type OpResult = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * One transaction for a batch of claims and outcomes on one run; outcomes first, as they free slots.
 * Dependents claimed as continuations are pushed to `continuations`; the caller starts them after
 * the commit.
 */
async function processOps(
  deps: EngineDeps,
  client: Client,
  runId: string,
  ops: EngineOp[],
  continuations: ClaimedStep[],
): Promise<OpResult[]> {
  const results: OpResult[] = ops.map(() => ({ ok: true, value: undefined }));
  const tx = await openRunTransaction(deps, client, runId);
  if (!tx) return results;
  const records = ops.flatMap((op, index) => (op.kind === "record" ? [{ op, index }] : []));
  const claims = ops.flatMap((op, index) => (op.kind === "claim" ? [{ op, index }] : []));
  const current = await tx.client.query<{ step_id: string; status: StepStatus; attempt: number }>(
    "select step_id, status, attempt from run_steps where run_id = $1 and step_id = any($2)",
    [runId, [...new Set(ops.map((op) => op.job.stepId))]],
  );
  const rows = new Map(current.rows.map((row) => [row.step_id, row]));

  const settled: string[] = [];
  for (const { op } of records) {
    if (op.kind !== "record") continue;
    const row = rows.get(op.job.stepId);
    // Cancelled (or otherwise moved on) while the tool ran: the result is not recorded.
    if (row?.status !== "running" || row.attempt !== op.attempt) continue;
    row.status = "completed"; // a duplicate outcome in the same batch must not count twice
    if (await recordOutcomeIn(tx, op.job.stepId, op.attempt, op.outcome, op.duration, deps, false)) {
      settled.push(op.job.stepId);
    }
  }
  if (settled.length > 0) await advance(tx, settled);
  continuations.push(...(await claimContinuations(deps, tx, rows)));

  if (claims.length > 0) {
    const claimed = await claimStepsIn(
      deps,
      tx,
      claims.map(({ op }) => op.job),
      rows,
    );
    claims.forEach(({ index }, i) => (results[index] = claimed[i]!));
  }
  await tx.flush();
  return results;
}

/**
 * Steps that outcomes in this transaction just made ready are claimed by this process directly,
 * as far as it has continuation slots, instead of going through the queue: a chain then costs one
 * transaction per step. The rest are queued as usual. Durability is unchanged: a continuation is a
 * running step of this worker, recovered like any other if the process dies.
 */
async function claimContinuations(
  deps: EngineDeps,
  tx: RunTransaction,
  rows: Map<string, { status: StepStatus; attempt: number }>,
): Promise<ClaimedStep[]> {
  const slots = deps.continuationSlots;
  if (!deps.workerId || !slots) return [];
  const free = slots.limit - slots.used;
  if (free <= 0) return [];
  const taken = tx.jobs.filter((job) => !job.runAt && !job.requeued).slice(0, free);
  if (taken.length === 0) return [];
  const takenSet = new Set(taken);
  tx.jobs.splice(0, tx.jobs.length, ...tx.jobs.filter((job) => !takenSet.has(job)));
  for (const job of taken) rows.set(job.stepId, { status: "ready", attempt: job.attempt - 1 });
  const claimed = await claimStepsIn(deps, tx, taken, rows);
  const local: ClaimedStep[] = [];
  claimed.forEach((result, index) => {
    if (result.ok && result.value) local.push(result.value as ClaimedStep);
    else if (!result.ok) tx.jobs.push(taken[index]!); // refused here: let the queue try it
  });
  slots.used += local.length;
  return local;
}

async function runContinuation(deps: EngineDeps, claimed: ClaimedStep): Promise<void> {
  try {
    await runClaimedStep(deps, claimed);
  } catch (error) {
    // The step stays running under this worker; recovery re-queues it if this process goes away.
    console.error(`[worker] continuation ${claimed.step.id} of run ${claimed.run.id}: ${errorMessage(error)}`);
  } finally {
    deps.continuationSlots!.used--;
  }
}

/**
 * Claims ready steps (ready → running) for this process. A job whose step is no longer ready at
 * the expected attempt (cancelled, already done, duplicate delivery) claims nothing.
 */
async function claimStepsIn(
  deps: EngineDeps,
  tx: RunTransaction,
  jobs: StepJobRef[],
  rows: Map<string, { status: StepStatus; attempt: number }>,
): Promise<OpResult[]> {
  const results: OpResult[] = jobs.map(() => ({ ok: true, value: undefined }));
  if (tx.run.status !== "running" && tx.run.status !== "failing" && tx.run.status !== "paused") return results;
  const eligible = jobs.flatMap((job, index) => {
    const row = rows.get(job.stepId);
    if (row?.status !== "ready" || row.attempt !== job.attempt - 1) return [];
    row.status = "running"; // a duplicate job in the same batch claims nothing
    return [{ job, index, step: tx.graph.steps.get(job.stepId)! }];
  });
  const gated = eligible.filter((e) => e.step.gated).map((e) => e.job.stepId);
  const approved = new Set<string>();
  if (gated.length > 0) {
    // Enforced here, not only in the UI: a gated step runs only with an approval of this version.
    const approvals = await tx.client.query<{ step_id: string }>(
      "select step_id from approvals where run_id = $1 and step_id = any($2) and plan_version = $3 and decision = 'approved'",
      [tx.run.id, gated, tx.run.plan_version],
    );
    for (const row of approvals.rows) approved.add(row.step_id);
  }
  const toRun: typeof eligible = [];
  for (const entry of eligible) {
    if (entry.step.gated && !approved.has(entry.step.id)) {
      rows.get(entry.step.id)!.status = "ready";
      results[entry.index] = {
        ok: false,
        error: new Error(`Refusing to run gated step ${entry.step.id} without an approval`),
      };
    } else if (deps.tools.get(entry.step.tool)?.capability === "user.ask") {
      await askUser(deps, tx, entry.step, entry.job.attempt);
    } else {
      toRun.push(entry);
    }
  }
  if (toRun.length === 0) return results;
  await tx.client.query(
    // A tool that marks the start of its effect itself has started none yet; for any other the
    // effect may begin as soon as the claim commits.
    `update run_steps rs set status = 'running', attempt = u.attempt, queued = false, started_at = now(), progress = 0, worker_id = $2,
       effects_started_at = case when u.marks then null else now() end,
       lease_expires_at = now() + make_interval(secs => $4::int / 1000.0)
     from jsonb_to_recordset($3::jsonb) as u(step_id text, attempt int, marks boolean)
     where rs.run_id = $1 and rs.step_id = u.step_id`,
    [
      tx.run.id,
      deps.workerId ?? null,
      JSON.stringify(
        toRun.map((e) => ({
          step_id: e.step.id,
          attempt: e.job.attempt,
          marks: deps.tools.get(e.step.tool)?.marksEffectStart === true,
        })),
      ),
      deps.leaseMs ?? null,
    ],
  );
  const outputs = await referencedOutputs(
    tx,
    toRun.flatMap((e) => [...e.step.references]),
  );
  const failed: string[] = [];
  for (const { job, index, step } of toRun) {
    tx.events.push({
      type: "step.running",
      stepId: step.id,
      data: { status: "running", attempt: job.attempt, ...(deps.workerName && { worker: deps.workerName }) },
    });
    const resolved = resolveArgs(step, outputs);
    if (resolved.ok) {
      results[index] = { ok: true, value: { step, attempt: job.attempt, args: resolved.args, run: tx.run } };
    } else {
      // Not retryable: the referenced output will not change.
      const outcome: Outcome = { ok: false, error: resolved.error, retryable: false };
      if (await recordOutcomeIn(tx, step.id, job.attempt, outcome, 0, deps, false)) failed.push(step.id);
    }
  }
  if (failed.length > 0) await advance(tx, failed);
  return results;
}

async function referencedOutputs(tx: RunTransaction, stepIds: string[]): Promise<Map<string, unknown>> {
  if (stepIds.length === 0) return new Map();
  const outputs = await tx.client.query<{ step_id: string; result: StepResult | null }>(
    "select step_id, result from run_steps where run_id = $1 and step_id = any($2)",
    [tx.run.id, [...new Set(stepIds)]],
  );
  return new Map(outputs.rows.filter((r) => r.result?.ok).map((r) => [r.step_id, r.result!.value]));
}

function resolveArgs(
  step: Step & GraphStep,
  outputs: ReadonlyMap<string, unknown>,
): { ok: true; args: unknown } | { ok: false; error: string } {
  if (step.references.size === 0) return { ok: true, args: step.args };
  try {
    return { ok: true, args: resolveReferences(step.args, outputs) };
  } catch (error) {
    if (!(error instanceof ReferenceError)) throw error;
    return { ok: false, error: error.message };
  }
}

/** `$step` references replaced by the recorded outputs; a missing field is an error, never undefined. */
async function resolveStepArgs(
  tx: RunTransaction,
  step: Step & GraphStep,
): Promise<{ ok: true; args: unknown } | { ok: false; error: string }> {
  return resolveArgs(step, await referencedOutputs(tx, [...step.references]));
}

/**
 * An `ask_user` step is answered by a person, not executed: it waits in `awaiting_input` with its
 * question (references resolved) and gives its parallelism slot back while it waits.
 */
async function askUser(deps: EngineDeps, tx: RunTransaction, step: Step & GraphStep, attempt: number): Promise<void> {
  const resolved = await resolveStepArgs(tx, step);
  const parsed = resolved.ok ? askUserInputSchema.safeParse(resolved.args) : undefined;
  await tx.client.query(
    "update run_steps set attempt = $3, queued = false, started_at = now() where run_id = $1 and step_id = $2",
    [tx.run.id, step.id, attempt],
  );
  if (!parsed?.success) {
    const error = resolved.ok ? `Invalid question: ${parsed!.error.issues[0]?.message}` : resolved.error;
    await recordOutcomeIn(tx, step.id, attempt, { ok: false, error, retryable: false }, 0, deps);
    return;
  }
  tx.run.active_steps--;
  const { question, choices } = parsed.data;
  const waiting: StepWaiting = { kind: "input", question, ...(choices && { choices }) };
  tx.setStatus(step.id, "awaiting_input", undefined, { attempt }, waiting);
  tx.events.push({ type: "input.requested", stepId: step.id, data: { question, ...(choices && { choices }) } });
  await dispatch(tx);
}

type Outcome =
  | { ok: true; value: unknown }
  /** `reason`: the person-facing reason stored on the failed step, when the error alone is not it. */
  | { ok: false; error: string; retryable: boolean; reason?: string };

async function recordOutcomeIn(
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
  if (!outcome.ok && outcome.retryable && attempt < step.retry.maxAttempts && tx.run.status === "running") {
    const delayMs = retryDelayMs(attempt, step.retry.backoffMs, deps.random);
    await tx.client.query(
      "update run_steps set status = 'ready', queued = true, error = $3 where run_id = $1 and step_id = $2",
      [tx.run.id, stepId, outcome.error],
    );
    tx.statuses.set(stepId, "ready");
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
  if (advanceNow) await advance(tx, [stepId]);
  return true;
}

class StepTimeoutError extends Error {}

/** The abort reason for steps still running when a worker's shutdown grace period ends. */
export class WorkerShutdownError extends Error {
  constructor() {
    super("The worker shut down while the step ran");
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

function errorMessage(error: unknown): string {
  if (error instanceof Error) return error.message || error.name;
  return String(error);
}

/** A tool that ignores its abort signal still cannot hold the step past its timeout. */
function raceAbort<T>(work: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}

/**
 * Progress and log lines are buffered and written at most every PROGRESS_INTERVAL_MS, so a chatty
 * tool costs a bounded number of transactions however often it reports.
 */
const PROGRESS_INTERVAL_MS = 200;

class ProgressReporter {
  private latest: { percent: number; message?: string } | undefined;
  private logs: { message: string; level: string; at: string }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: pg.Pool,
    private readonly run: RunRow,
    private readonly stepId: string,
  ) {}

  progress(percent: number, message?: string): void {
    this.latest = { percent: Math.max(0, Math.min(100, Math.round(percent))), ...(message && { message }) };
    this.schedule();
  }

  log(message: string, level: string): void {
    if (this.logs.length < 1000)
      this.logs.push({ message: message.slice(0, 2000), level, at: new Date().toISOString() });
    this.schedule();
  }

  private schedule(): void {
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.writing = this.writing.then(() => this.write());
    }, PROGRESS_INTERVAL_MS);
  }

  private async write(): Promise<void> {
    const progress = this.latest;
    const logs = this.logs;
    this.latest = undefined;
    this.logs = [];
    if (!progress && logs.length === 0) return;
    const events: NewEvent[] = [];
    if (progress)
      events.push({
        type: "step.progress",
        stepId: this.stepId,
        data: { progress: progress.percent, ...(progress.message && { message: progress.message }) },
      });
    if (logs.length) events.push({ type: "step.log", stepId: this.stepId, data: { lines: logs } });
    await inTransaction(this.pool, async (client) => {
      const still = await client.query(
        `update run_steps set progress = coalesce($3, progress) where run_id = $1 and step_id = $2 and status = 'running'`,
        [this.run.id, this.stepId, progress?.percent ?? null],
      );
      if (still.rowCount === 0) return;
      await appendEvents(
        client,
        { streamId: this.run.id, planId: this.run.plan_id, runId: this.run.id, traceId: this.run.trace_id },
        events,
      );
    }).catch(() => undefined);
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
    await this.write();
  }
}

/** Approve or deny a gated step. Enforced here, whatever the client: only awaiting steps can be decided. */
export async function decideApproval(
  deps: EngineDeps,
  input: { runId: string; stepId: string; approve: boolean; actor: string; comment?: string },
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await openRunTransaction(deps, client, input.runId);
    if (!tx) throw new AppError("not_found", `No run ${input.runId}`);
    await tx.loadStatuses([input.stepId]);
    const status = tx.statuses.get(input.stepId);
    if (status === undefined) throw new AppError("not_found", `Run has no step ${input.stepId}`);
    if (status !== "awaiting_approval") {
      // A repeated decision (a double click, a client retrying after a lost response) answers
      // with the decision already recorded; only a contrary one is an error.
      const recorded = await client.query<{ decision: string; actor: string }>(
        `select decision, actor from approvals where run_id = $1 and step_id = $2 order by id desc limit 1`,
        [input.runId, input.stepId],
      );
      const last = recorded.rows[0];
      if (last && (last.decision === "approved") === input.approve) return;
      throw new AppError("invalid_state", `${input.stepId} is ${status}, not awaiting approval`);
    }
    await client.query(
      `insert into approvals (run_id, step_id, plan_version, decision, actor, comment) values ($1, $2, $3, $4, $5, $6)`,
      [
        input.runId,
        input.stepId,
        tx.run.plan_version,
        input.approve ? "approved" : "denied",
        input.actor,
        input.comment ?? null,
      ],
    );
    await audit(tx, input.actor, input.approve ? "step.approved" : "step.denied", input.stepId, {
      comment: input.comment ?? null,
    });
    tx.events.push({
      type: "approval.decided",
      stepId: input.stepId,
      data: { decision: input.approve ? "approved" : "denied", actor: input.actor, comment: input.comment ?? null },
    });
    if (input.approve) {
      makeReady(tx, input.stepId);
      await dispatch(tx);
    } else {
      tx.setStatus(
        input.stepId,
        "skipped",
        `Approval denied by ${input.actor}${input.comment ? `: ${input.comment}` : ""}`,
      );
      tx.run.open_steps--;
      await advance(tx, [input.stepId]);
    }
    await tx.flush();
  });
}

/** The answer to an `ask_user` step becomes its output, and the run carries on from there. */
export async function answerQuestion(
  deps: EngineDeps,
  input: { runId: string; stepId: string; answer: string; actor: string },
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    const row = await client.query<{ status: StepStatus; waiting: StepWaiting | null; started_at: Date | null }>(
      "select status, waiting, started_at from run_steps where run_id = $1 and step_id = $2",
      [input.runId, input.stepId],
    );
    const current = row.rows[0];
    if (!current) throw new AppError("not_found", `Run has no step ${input.stepId}`);
    if (current.status !== "awaiting_input" || current.waiting?.kind !== "input") {
      throw new AppError("invalid_state", `${input.stepId} is ${current.status}, not waiting for an answer`);
    }
    const { choices } = current.waiting;
    if (choices && !choices.includes(input.answer)) {
      throw new AppError("invalid_input", `The answer must be one of: ${choices.join(", ")}`);
    }
    const now = tx.now;
    const result: StepResult = {
      ok: true,
      value: input.answer,
      duration: current.started_at ? now.getTime() - current.started_at.getTime() : 0,
      timestamp: now.toISOString(),
    };
    await client.query("update run_steps set result = $3::jsonb, progress = 100 where run_id = $1 and step_id = $2", [
      input.runId,
      input.stepId,
      JSON.stringify(result),
    ]);
    tx.statuses.set(input.stepId, "awaiting_input");
    tx.events.push({ type: "input.answered", stepId: input.stepId, data: { actor: input.actor } });
    tx.setStatus(input.stepId, "completed", undefined, { result });
    tx.run.open_steps--;
    await audit(tx, input.actor, "step.answered", input.stepId, { answer: input.answer });
    await advance(tx, [input.stepId]);
    await tx.flush();
  });
}

/** Loads a gated step's wait if it is still the one `expiresAt` belongs to. */
async function currentApprovalWait(tx: RunTransaction, stepId: string, expiresAt: string): Promise<boolean> {
  const row = await tx.client.query<{ status: StepStatus; waiting: StepWaiting | null }>(
    "select status, waiting from run_steps where run_id = $1 and step_id = $2",
    [tx.run.id, stepId],
  );
  const current = row.rows[0];
  return (
    current?.status === "awaiting_approval" &&
    current.waiting?.kind === "approval" &&
    current.waiting.expiresAt === expiresAt
  );
}

type ApprovalTimer = { runId: string; stepId: string; expiresAt: string };

/** Runs `apply` only while `job`'s wait is still the step's current one; a stale timer does nothing. */
async function onApprovalWait(
  deps: EngineDeps,
  job: ApprovalTimer,
  apply: (tx: RunTransaction) => Promise<void>,
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await openRunTransaction(deps, client, job.runId);
    if (!tx || FINISHED_RUN_STATUSES.has(tx.run.status)) return;
    if (!(await currentApprovalWait(tx, job.stepId, job.expiresAt))) return;
    await apply(tx);
    await tx.flush();
  });
}

/** Timer job: the approval of `stepId` expires soon. */
export function warnApprovalExpiring(deps: EngineDeps, job: ApprovalTimer): Promise<void> {
  return onApprovalWait(deps, job, async (tx) => {
    tx.events.push({ type: "approval.expiring", stepId: job.stepId, data: { expiresAt: job.expiresAt } });
  });
}

/** Timer job: nobody decided on `stepId` in time, so it is skipped with the reason. */
export function expireApproval(deps: EngineDeps, job: ApprovalTimer): Promise<void> {
  return onApprovalWait(deps, job, async (tx) => {
    const minutes = Math.round(tx.run.approval_timeout_ms / 60_000);
    const waited =
      minutes >= 1 ? `${minutes} minute${minutes === 1 ? "" : "s"}` : `${tx.run.approval_timeout_ms / 1000} s`;
    tx.statuses.set(job.stepId, "awaiting_approval");
    tx.setStatus(job.stepId, "skipped", `No approval decision within ${waited}`);
    tx.run.open_steps--;
    await audit(tx, "system", "step.approval_expired", job.stepId, { expiresAt: job.expiresAt });
    await advance(tx, [job.stepId]);
  });
}

/** Cancels a run: running steps are aborted, every other open step becomes cancelled. */
export async function cancelRun(deps: EngineDeps, input: { runId: string; actor: string }): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await openRunTransaction(deps, client, input.runId);
    if (!tx) throw new AppError("not_found", `No run ${input.runId}`);
    if (tx.run.status === "completed" || tx.run.status === "failed" || tx.run.status === "cancelled") {
      throw new AppError("invalid_state", `The run is already ${tx.run.status}`);
    }
    await cancelOpenSteps(tx, `Cancelled by ${input.actor}`);
    tx.run.status = "cancelled";
    tx.run.active_steps = 0;
    tx.events.push({ type: "run.cancelled", data: { status: "cancelled", actor: input.actor } });
    await audit(tx, input.actor, "run.cancelled", null);
    await tx.flush();
    await client.query("select pg_notify($1, $2)", [CANCEL_CHANNEL, input.runId]);
  });
}

/** Aborts this process's in-flight steps of a cancelled run. */
export function abortRunLocally(deps: EngineDeps, runId: string): void {
  for (const controller of deps.cancellations.get(runId) ?? []) controller.abort(new Error("Run cancelled"));
}

/** How many of its own heartbeats a worker may miss before its running steps count as interrupted. */
export const MISSED_BEATS = 5;

/** SQL: the worker owning step row `rs` has beaten within its own MISSED_BEATS intervals. */
const OWNER_ALIVE = `exists (select 1 from workers w where w.id = rs.worker_id and w.stopped_at is null
  and w.last_seen > now() - make_interval(secs => w.heartbeat_ms * ${MISSED_BEATS} / 1000.0))`;

/**
 * Renews the leases of the attempts this worker is executing (or still recording). An attempt
 * whose row no longer names it (recovered by a peer after its lease ran out, cancelled) is aborted
 * here: another attempt may already be running, and this one's outcome would not be recorded.
 * A lease that lapsed during a short cut but was not yet taken is simply renewed.
 */
export async function renewLeases(deps: EngineDeps): Promise<void> {
  const inFlight = [...(deps.inFlight?.values() ?? [])];
  if (!deps.workerId || !deps.leaseMs || inFlight.length === 0) return;
  const renewed = await deps.pool.query<{ key: string }>(
    `update run_steps rs set lease_expires_at = now() + make_interval(secs => $2::int / 1000.0)
     from jsonb_to_recordset($3::jsonb) as u(run_id uuid, step_id text, attempt int)
     where rs.run_id = u.run_id and rs.step_id = u.step_id and rs.attempt = u.attempt
       and rs.status = 'running' and rs.worker_id = $1
     returning rs.run_id || '/' || rs.step_id || '/' || rs.attempt as key`,
    [
      deps.workerId,
      deps.leaseMs,
      JSON.stringify(
        inFlight
          .map(({ runId, stepId, attempt }) => ({ run_id: runId, step_id: stepId, attempt }))
          .sort((a, b) => (a.run_id + a.step_id).localeCompare(b.run_id + b.step_id)),
      ),
    ],
  );
  const held = new Set(renewed.rows.map((row) => row.key));
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
  await requeueStrandedJobs(deps, staleAfterMs);
  // A worker is judged by its own heartbeat interval: peers may be configured differently. Its
  // own steps a live worker never recovers: they are running here (or their outcomes are being
  // written), even if its own heartbeat went stale while the database was out of reach.
  const orphans = await deps.pool.query<{ run_id: string; step_id: string; attempt: number; worker_id: string | null }>(
    `select rs.run_id, rs.step_id, rs.attempt, rs.worker_id from run_steps rs
     where rs.status = 'running' and rs.tool <> '${AGENT_TASK_TOOL}'
       and rs.worker_id is distinct from $1
       and (rs.lease_expires_at < now() or not ${OWNER_ALIVE})
     order by rs.started_at`,
    [deps.workerId ?? null],
  );
  for (const orphan of orphans.rows) {
    await inTransaction(deps.pool, async (client) => {
      // A run locked elsewhere is passed over, not waited for: its holder may be a frozen worker
      // (SIGSTOP), and one stuck recovery would stall every other run's recovery and this
      // worker's own heartbeat. The next tick tries again; the server ends a frozen holder's
      // session after idle_in_transaction_session_timeout.
      const tx = await openRunTransaction(deps, client, orphan.run_id, { skipLocked: true });
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
                (rs.lease_expires_at is null or rs.lease_expires_at >= now()) and ${OWNER_ALIVE} as held
         from run_steps rs where rs.run_id = $1 and rs.step_id = $2 for update of rs skip locked`,
        [orphan.run_id, orphan.step_id],
      );
      const row = current.rows[0];
      if (row?.status !== "running" || row.attempt !== orphan.attempt || row.worker_id !== orphan.worker_id) return;
      if (row.held) return;
      const step = tx.graph.steps.get(orphan.step_id)!;
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
        tx.statuses.set(step.id, "ready");
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
  const stranded = await deps.pool.query<{ run_id: string; step_id: string; attempt: number }>(
    `select rs.run_id, rs.step_id, rs.attempt from run_steps rs
     join graphile_worker.jobs j on j.key = rs.run_id || ':' || rs.step_id || ':' || (rs.attempt + 1)
     where rs.status = 'ready' and rs.queued and j.locked_at < now() - make_interval(secs => $1)`,
    [staleAfterMs / 1000],
  );
  if (stranded.rowCount === 0) return;
  await enqueueStepJobs(
    deps.pool,
    stranded.rows.map((row) => ({ runId: row.run_id, stepId: row.step_id, attempt: row.attempt + 1, requeued: true })),
  );
}

async function requireRun(deps: EngineDeps, client: Client, runId: string): Promise<RunTransaction> {
  const tx = await openRunTransaction(deps, client, runId);
  if (!tx) throw new AppError("not_found", `No run ${runId}`);
  return tx;
}

async function audit(
  tx: RunTransaction,
  actor: string,
  action: string,
  stepId: string | null,
  detail: Record<string, unknown> = {},
) {
  await tx.client.query(
    "insert into audit_entries (actor, action, plan_id, plan_version, run_id, step_id, detail) values ($1, $2, $3, $4, $5, $6, $7)",
    [actor, action, tx.run.plan_id, tx.run.plan_version, tx.run.id, stepId, JSON.stringify(detail)],
  );
}

/** Pause: running steps finish, nothing new starts until resumed. */
export async function pauseRun(deps: EngineDeps, input: { runId: string; actor: string }): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (tx.run.status !== "running")
      throw new AppError("invalid_state", `Only a running run can be paused; it is ${tx.run.status}`);
    tx.run.status = "paused";
    tx.events.push({ type: "run.paused", data: { status: "paused", actor: input.actor } });
    await audit(tx, input.actor, "run.paused", null);
    await tx.flush();
  });
}

export async function resumeRun(deps: EngineDeps, input: { runId: string; actor: string }): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (tx.run.status !== "paused")
      throw new AppError("invalid_state", `Only a paused run can be resumed; it is ${tx.run.status}`);
    tx.run.status = "running";
    tx.events.push({ type: "run.resumed", data: { status: "running", actor: input.actor } });
    await audit(tx, input.actor, "run.resumed", null);
    await dispatch(tx);
    await finishIfDone(tx);
    await tx.flush();
  });
}

/** Steps blocked, directly or transitively, by `stepId`; they return to pending when it is retried or skipped. */
async function unblockDependents(tx: RunTransaction, stepId: string): Promise<void> {
  let frontier = [stepId];
  while (frontier.length > 0) {
    const dependents = [...new Set(frontier.flatMap((id) => tx.graph.dependents.get(id) ?? []))];
    await tx.loadStatuses(dependents);
    frontier = dependents.filter((id) => tx.statuses.get(id) === "blocked");
    for (const id of frontier) {
      tx.setStatus(id, "pending", "");
      tx.run.open_steps++;
    }
  }
}

/** A person's intervention on a failed run puts it back to work. */
function reopenRun(tx: RunTransaction, reason: string): void {
  if (tx.run.status !== "failed" && tx.run.status !== "failing") return;
  tx.run.status = "running";
  tx.events.push({ type: "run.running", data: { status: "running", reason } });
}

/** Opens a run transaction on a failed step of a run that can still be steered. */
async function onFailedStep(
  deps: EngineDeps,
  input: { runId: string; stepId: string },
  verb: string,
  apply: (tx: RunTransaction) => Promise<void>,
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    await tx.loadStatuses([input.stepId]);
    const status = tx.statuses.get(input.stepId);
    if (status !== "failed") {
      throw new AppError(
        "invalid_state",
        `Only a failed step can be ${verb}; ${input.stepId} is ${status ?? "unknown"}`,
      );
    }
    if (tx.run.status === "cancelled") throw new AppError("invalid_state", "The run was cancelled");
    await apply(tx);
    await tx.flush();
  });
}

/** A failed step is tried again (a new attempt); what it blocked waits for it again. */
export function retryStep(deps: EngineDeps, input: { runId: string; stepId: string; actor: string }): Promise<void> {
  return onFailedStep(deps, input, "retried", async (tx) => {
    tx.setStatus(input.stepId, "ready", "");
    tx.run.open_steps++;
    await unblockDependents(tx, input.stepId);
    reopenRun(tx, `${input.stepId} retried by ${input.actor}`);
    await audit(tx, input.actor, "step.retried", input.stepId);
    await dispatch(tx);
  });
}

/** A failed step is given up: its dependents run unless they need its output. */
export function skipStep(deps: EngineDeps, input: { runId: string; stepId: string; actor: string }): Promise<void> {
  return onFailedStep(deps, input, "skipped", async (tx) => {
    tx.setStatus(input.stepId, "skipped", `Skipped by ${input.actor} after it failed`);
    await unblockDependents(tx, input.stepId);
    reopenRun(tx, `${input.stepId} skipped by ${input.actor}`);
    await audit(tx, input.actor, "step.skipped", input.stepId);
    await advance(tx, [input.stepId]);
  });
}

/**
 * Applies a recovery that changed the plan (new arguments for the failed step, or steps inserted
 * before it): the run moves to `newVersion`, new steps join it as pending, and the failed step is
 * decided again — so a gated step needs a fresh approval for its changed definition. Approvals of
 * the steps that did not change are carried over. Nothing that already completed runs again.
 */
export async function adoptPlanVersion(
  deps: EngineDeps,
  input: {
    runId: string;
    stepId: string;
    newVersion: number;
    insertedStepIds: string[];
    actor: string;
    detail: object;
  },
): Promise<void> {
  await onFailedStep(deps, input, "recovered", async (tx) => {
    const oldVersion = tx.run.plan_version;
    const steps = await loadPlanSteps(tx.client, tx.run.plan_id, input.newVersion);
    tx.graph = await deps.graphs.get(tx.run.plan_id, input.newVersion, async () => steps);
    tx.run.plan_version = input.newVersion;
    await tx.client.query("update runs set plan_version = $2 where id = $1", [tx.run.id, input.newVersion]);
    await tx.client.query(
      `insert into run_steps (run_id, step_id, position, tool, status, depends_on)
       select $1, s.id, 0, s.tool, 'pending', s.depends_on
       from jsonb_to_recordset($2::jsonb) as s(id text, tool text, depends_on text[])`,
      [
        tx.run.id,
        JSON.stringify(
          steps
            .filter((step) => input.insertedStepIds.includes(step.id))
            .map((step) => ({ id: step.id, tool: step.tool, depends_on: step.dependsOn })),
        ),
      ],
    );
    // Plan order may have changed around the inserted steps; dispatch follows it.
    await tx.client.query(
      `update run_steps rs set position = s.position, depends_on = s.depends_on
       from jsonb_to_recordset($2::jsonb) as s(id text, position int, depends_on text[])
       where rs.run_id = $1 and rs.step_id = s.id`,
      [
        tx.run.id,
        JSON.stringify(steps.map((step, position) => ({ id: step.id, position, depends_on: step.dependsOn }))),
      ],
    );
    await tx.client.query(
      `insert into approvals (run_id, step_id, plan_version, decision, actor, comment)
       select run_id, step_id, $3, decision, actor, comment from approvals
       where run_id = $1 and plan_version = $2 and step_id <> $4`,
      [tx.run.id, oldVersion, input.newVersion, input.stepId],
    );
    for (const id of input.insertedStepIds) tx.statuses.set(id, "pending");
    tx.run.open_steps += input.insertedStepIds.length;
    tx.setStatus(input.stepId, "pending", "");
    tx.run.open_steps++;
    await unblockDependents(tx, input.stepId);
    reopenRun(tx, `Recovery of ${input.stepId} applied by ${input.actor}`);
    tx.events.push({
      type: "run.plan_changed",
      stepId: input.stepId,
      data: { planVersion: input.newVersion, previousVersion: oldVersion, insertedStepIds: input.insertedStepIds },
    });
    await audit(tx, input.actor, "step.recovered", input.stepId, { ...input.detail, planVersion: input.newVersion });
    await advance(tx, [], [...input.insertedStepIds, input.stepId]);
  });
}

/**
 * A blocker signal in an agent's session pauses its run: running steps finish, nothing new starts.
 * The session remembers that the pause is the signal's, so clearing the signal lifts only that.
 */
async function holdForSignal(tx: RunTransaction, reason: string): Promise<boolean> {
  if (tx.run.status !== "running") return false;
  tx.run.status = "paused";
  tx.events.push({ type: "run.paused", data: { status: "paused", reason } });
  await tx.client.query("update agent_sessions set paused_by_signal = true where run_id = $1", [tx.run.id]);
  return true;
}

/** Pauses a session's run for a blocker signal raised from outside the engine (CLI, API, browser). */
export async function pauseRunForSignal(deps: EngineDeps, input: { runId: string; reason: string }): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (await holdForSignal(tx, input.reason)) await tx.flush();
  });
}

/** The last blocker was cleared: a run the signal paused goes on; a person's own pause stays. */
export async function resumeRunAfterSignal(deps: EngineDeps, input: { runId: string; actor: string }): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    const held = await client.query<{ paused_by_signal: boolean }>(
      "select paused_by_signal from agent_sessions where run_id = $1",
      [input.runId],
    );
    if (!held.rows[0]?.paused_by_signal) return;
    await client.query("update agent_sessions set paused_by_signal = false where run_id = $1", [input.runId]);
    if (tx.run.status !== "paused") return;
    tx.run.status = "running";
    tx.events.push({ type: "run.resumed", data: { status: "running", actor: input.actor, reason: "Signals cleared" } });
    await dispatch(tx);
    await finishIfDone(tx);
    await tx.flush();
  });
}

/** What an agent may report about its task (seed 003's `update_tasks[].status`). */
export type AgentTaskStatus = "TODO" | "IN_PROGRESS" | "DONE" | "CANCELLED";

export interface AgentTaskUpdate {
  stepId: string;
  status: AgentTaskStatus;
  /** The agent's notes: what it did, or why it hands the task back or drops it. */
  note?: string;
}

/**
 * Whether `update` may move a step in `status` as asked: "apply", "noop" (already there — an agent
 * repeating itself after a lost answer is not an error), or why not. Pure; used to check a whole
 * `update` before anything is written, and again under the run lock while writing.
 */
export function checkAgentTaskUpdate(
  step: Pick<Step, "id" | "tool" | "dependsOn">,
  status: StepStatus,
  wanted: AgentTaskStatus,
): { kind: "apply" | "noop" } | { kind: "refused"; reason: string } {
  const name = taskName(step.id);
  if (step.tool !== AGENT_TASK_TOOL) {
    return { kind: "refused", reason: `${name} is run by Stepwise (tool ${step.tool}), not by an agent.` };
  }
  const target: Record<AgentTaskStatus, StepStatus> = {
    TODO: "awaiting_agent",
    IN_PROGRESS: "running",
    DONE: "completed",
    CANCELLED: "skipped",
  };
  if (status === target[wanted]) return { kind: "noop" };
  if (status === "awaiting_agent" && wanted !== "TODO") return { kind: "apply" };
  if (status === "running" && wanted !== "IN_PROGRESS") return { kind: "apply" };
  const why: Partial<Record<StepStatus, string>> = {
    pending: `it waits for its dependencies (${step.dependsOn.map(taskName).join(", ")}) to be done`,
    blocked: "a dependency failed; that has to be fixed first",
    awaiting_approval: "it waits for a person's approval",
    completed: "it is already DONE",
    skipped: "it was cancelled or skipped",
    cancelled: "the run was cancelled",
  };
  return { kind: "refused", reason: `${name} cannot become ${wanted}: ${why[status] ?? `it is ${status}`}.` };
}

/** Seed 003 numbers tasks; a task's number is its step's: `step_7` is task 7. */
function taskName(stepId: string): string {
  const number = /^step_(\d+)$/.exec(stepId)?.[1];
  return number ? `Task ${number}` : `Step ${stepId}`;
}

/**
 * Applies an agent's task updates in one transaction: all of them, or — when one is refused —
 * none. DONE records the agent's note as the step's output, and dependents move on as after any
 * completed step.
 */
export async function updateAgentTasks(
  deps: EngineDeps,
  input: { runId: string; updates: AgentTaskUpdate[]; actor: string; adoptVersion?: number },
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (tx.run.status === "cancelled") throw new AppError("invalid_state", "The session's run was cancelled");
    if (input.adoptVersion !== undefined && input.adoptVersion > tx.run.plan_version) {
      await adoptVersionIn(deps, tx, input.adoptVersion, input.actor);
    }
    const rows = await client.query<{ step_id: string; status: StepStatus; started_at: Date | null; attempt: number }>(
      "select step_id, status, started_at, attempt from run_steps where run_id = $1 and step_id = any($2)",
      [tx.run.id, input.updates.map((update) => update.stepId)],
    );
    const byId = new Map(rows.rows.map((row) => [row.step_id, row]));
    const settled: string[] = [];
    for (const update of input.updates) {
      const step = tx.graph.steps.get(update.stepId);
      const row = byId.get(update.stepId);
      if (!step || !row)
        throw new AppError("not_found", `There is no ${taskName(update.stepId).toLowerCase()} in this plan`);
      const check = checkAgentTaskUpdate(step, row.status, update.status);
      if (check.kind === "refused") throw new AppError("invalid_state", check.reason);
      if (check.kind === "noop") continue;
      tx.statuses.set(step.id, row.status);
      const detail = { agent: input.actor, ...(update.note && { note: update.note }) };
      if (update.status === "IN_PROGRESS") {
        row.attempt += 1;
        await client.query(
          "update run_steps set attempt = $3, started_at = now(), progress = 0 where run_id = $1 and step_id = $2",
          [tx.run.id, step.id, row.attempt],
        );
        row.started_at = tx.now;
        tx.setStatus(
          step.id,
          "running",
          undefined,
          { attempt: row.attempt, ...detail },
          {
            kind: "agent",
            agent: input.actor,
            since: tx.now.toISOString(),
          },
        );
      } else if (update.status === "TODO") {
        tx.setStatus(
          step.id,
          "awaiting_agent",
          `Handed back by ${input.actor}${update.note ? `: ${update.note}` : ""}`,
          detail,
          {
            kind: "agent",
          },
        );
      } else if (update.status === "DONE") {
        const result: StepResult = {
          ok: true,
          value: { doneBy: input.actor, ...(update.note && { note: update.note }) },
          duration: row.started_at ? tx.now.getTime() - row.started_at.getTime() : 0,
          timestamp: tx.now.toISOString(),
        };
        tx.setResult(step.id, result);
        tx.setStatus(step.id, "completed", undefined, { ...detail, result });
        tx.run.open_steps--;
        settled.push(step.id);
      } else {
        // A task is dropped only from waiting: one in progress is handed back first.
        if (row.status === "running") tx.setStatus(step.id, "awaiting_agent", undefined, detail, { kind: "agent" });
        tx.setStatus(step.id, "skipped", `Cancelled by ${input.actor}${update.note ? `: ${update.note}` : ""}`, detail);
        tx.run.open_steps--;
        settled.push(step.id);
      }
      row.status = tx.statuses.get(step.id)!;
      await audit(tx, input.actor, `task.${update.status.toLowerCase()}`, step.id, detail);
    }
    await advance(tx, settled);
    await tx.flush();
  });
}

/**
 * Moves an agent session's run to a newer version of its plan — tasks the agent added, or a
 * person's edit in the browser. New steps join as pending; steps that have not started and whose
 * definition or dependencies changed are decided again (a changed gated step needs a new
 * approval); steps removed from the plan that have not started are cancelled; nothing that
 * started or finished is touched. A finished run with new work is reopened.
 */
export async function adoptPlanVersionIntoRun(
  deps: EngineDeps,
  input: { runId: string; version: number; actor: string },
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (input.version <= tx.run.plan_version) return;
    if (tx.run.status === "cancelled") throw new AppError("invalid_state", "The session's run was cancelled");
    await adoptVersionIn(deps, tx, input.version, input.actor);
    await tx.flush();
  });
}

const NOT_STARTED: ReadonlySet<StepStatus> = new Set(["pending", "awaiting_agent", "awaiting_approval"]);

async function adoptVersionIn(deps: EngineDeps, tx: RunTransaction, version: number, actor: string): Promise<void> {
  const oldVersion = tx.run.plan_version;
  const oldGraph = tx.graph;
  const steps = await loadPlanSteps(tx.client, tx.run.plan_id, version);
  tx.graph = await deps.graphs.get(tx.run.plan_id, version, async () => steps);
  tx.run.plan_version = version;
  await tx.client.query("update runs set plan_version = $2 where id = $1", [tx.run.id, version]);
  const current = await tx.client.query<{ step_id: string; status: StepStatus; queued: boolean }>(
    "select step_id, status, queued from run_steps where run_id = $1",
    [tx.run.id],
  );
  const existing = new Map(current.rows.map((row) => [row.step_id, row]));
  for (const row of current.rows) tx.statuses.set(row.step_id, row.status);
  const inserted = steps.filter((step) => !existing.has(step.id));
  await tx.client.query(
    `insert into run_steps (run_id, step_id, position, tool, status, depends_on, reason)
     select $1, s.id, 0, s.tool, s.status, s.depends_on, s.reason
     from jsonb_to_recordset($2::jsonb) as s(id text, tool text, status text, depends_on text[], reason text)`,
    [
      tx.run.id,
      JSON.stringify(
        inserted.map((step) => ({
          id: step.id,
          tool: step.tool,
          depends_on: step.dependsOn,
          status: step.skipped ? "skipped" : "pending",
          reason: step.skipped ? "Skipped by the reviewer" : null,
        })),
      ),
    ],
  );
  await tx.client.query(
    `update run_steps rs set position = s.position, depends_on = s.depends_on
     from jsonb_to_recordset($2::jsonb) as s(id text, position int, depends_on text[])
     where rs.run_id = $1 and rs.step_id = s.id`,
    [tx.run.id, JSON.stringify(steps.map((step, position) => ({ id: step.id, position, depends_on: step.dependsOn })))],
  );
  const reconsider: string[] = [];
  for (const step of inserted) {
    tx.statuses.set(step.id, step.skipped ? "skipped" : "pending");
    if (!step.skipped) {
      tx.run.open_steps++;
      reconsider.push(step.id);
    }
  }
  const unchanged: string[] = [];
  for (const [id, row] of existing) {
    const before = oldGraph.steps.get(id);
    const after = tx.graph.steps.get(id);
    if (!NOT_STARTED.has(row.status)) {
      if (after) unchanged.push(id);
      continue;
    }
    if (!after || after.skipped) {
      tx.setStatus(
        id,
        after ? "skipped" : "cancelled",
        after ? "Skipped by the reviewer" : `Removed from the plan in version ${version}`,
      );
      tx.run.open_steps--;
      continue;
    }
    if (before && sameDefinition(before, after)) {
      unchanged.push(id);
      continue;
    }
    // Decided again from pending: its gate or its dependencies may have changed.
    if (row.status !== "pending") tx.setStatus(id, "pending", "");
    reconsider.push(id);
  }
  // Approvals hold for exactly the definition approved: only unchanged steps keep theirs.
  await tx.client.query(
    `insert into approvals (run_id, step_id, plan_version, decision, actor, comment)
     select run_id, step_id, $3, decision, actor, comment from approvals
     where run_id = $1 and plan_version = $2 and step_id = any($4)`,
    [tx.run.id, oldVersion, version, unchanged],
  );
  if (tx.run.open_steps > 0 && (tx.run.status === "completed" || tx.run.status === "failed")) {
    tx.run.status = "running";
    tx.events.push({ type: "run.running", data: { status: "running", reason: `New work in version ${version}` } });
  }
  tx.events.push({
    type: "run.plan_changed",
    data: { planVersion: version, previousVersion: oldVersion, insertedStepIds: inserted.map((step) => step.id) },
  });
  await audit(tx, actor, "run.plan_adopted", null, { planVersion: version, previousVersion: oldVersion });
  await advance(tx, [], reconsider);
}

function sameDefinition(a: Step & GraphStep, b: Step & GraphStep): boolean {
  return (
    a.tool === b.tool &&
    a.gated === b.gated &&
    JSON.stringify(a.args) === JSON.stringify(b.args) &&
    JSON.stringify(a.dependsOn) === JSON.stringify(b.dependsOn)
  );
}
