import type pg from "pg";
import { z } from "zod";
import { preparedExecute, type CommitWith, type Statement } from "../db";
import type { AuditAction } from "../audit/actions";
import { recordAudit } from "../audit/audit-log";
import { AppError } from "../errors";
import { appendEventsStatement } from "../events/store";
import type { NewEvent, StepStatusData } from "../events/types";
import type { Step, StepStatus } from "../plan-schema";
import { SETTLED_STEP_STATUSES, type StepResult } from "../vocabulary";
import type { EngineDeps } from "./deps";
import type { RunGraph } from "./graph";
import {
  approvalTimersStatement,
  runEndedJobs,
  stepJobsStatement,
  type ApprovalTimerJob,
  type StepJob,
} from "../queue/jobs";
import { assertTransition, type RunStatus } from "./state-machine";

export type Client = pg.PoolClient;

export interface RunRow {
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
  recovery_policy: "ask" | "auto";
  /** The database's clock at the start of the transaction. */
  db_now: Date;
  /** Someone follows the run's events live (`runs.watched_until`, kept by `EventBus.watch`). */
  watched: boolean;
  /** A sub-plan's run: the run whose `run_plan` step started it (server/engine/child-runs.ts). */
  parent_run_id: string | null;
  parent_step_id: string | null;
}

/**
 * What a step in awaiting_approval, awaiting_input or awaiting_agent waits for — or, for an agent
 * task in progress, which agent holds it. Shown to people and checked by timers.
 */
export const stepWaitingSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("approval"), expiresAt: z.string() }),
  z.object({ kind: z.literal("input"), question: z.string(), choices: z.array(z.string()).optional() }),
  z.object({ kind: z.literal("agent"), agent: z.string().optional(), since: z.string().optional() }),
  /** A `run_plan` step waits for its child run (its id once started): server/engine/child-runs.ts. */
  z.object({ kind: z.literal("child_run"), runId: z.string().optional() }),
]);
export type StepWaiting = z.output<typeof stepWaitingSchema>;

interface StepUpdate {
  status: StepStatus;
  reason?: string | null;
  waiting: StepWaiting | null;
}

/** A claim's columns (ready → running), written with the step's other writes. */
export interface StepClaim {
  attempt: number;
  worker_id: string | null;
  /** The tool marks the start of its effect itself: none has started at the claim. */
  marks: boolean;
  /** The lease, counted from the statement that writes the claim (clock_timestamp()). */
  lease_ms: number | null;
}

/** A ready, unqueued step as the hot path read it under the run's lock. */
export interface ReadyStepRow {
  step_id: string;
  attempt: number;
  position: number;
}

/** A step row as the hot path read it under the run's lock: enough to queue the step without asking again. */
export interface KnownStepRow {
  attempt: number;
  queued: boolean;
  position: number;
}

/**
 * The routine transitions of a step on its way to success: written to the run's stream always,
 * pushed live (NOTIFY) only while someone watches the run. A NOTIFY wakes every listening backend
 * of the database and every process's bus, and was the largest single cost of a step transition;
 * nobody is told of these in an unwatched run, and a watcher reads them from the table when it
 * starts. Everything else — a run's start and end, a failure, a step waiting for a person or an
 * agent — is pushed whoever watches, as things people and agents wait on.
 */
const QUIET_WHEN_UNWATCHED = new Set<NewEvent["type"]>(["step.ready", "step.running", "step.completed"]);

/** Everything one engine transaction knows and changes about a run; written back once at the end. */
export class RunTransaction {
  readonly events: NewEvent[] = [];
  readonly jobs: StepJob[] = [];
  readonly timers: ApprovalTimerJob[] = [];
  readonly statuses = new Map<string, StepStatus>();
  /** Final results, written with the status changes in one statement. */
  private readonly results = new Map<string, StepResult>();
  private readonly updates = new Map<string, StepUpdate>();
  private readonly claims = new Map<string, StepClaim>();
  /**
   * Set on the hot path (claims and outcomes, batching.ts): status changes stay in memory until
   * the write-back instead of being written before each dispatch, which instead reads around them.
   * Code that reads step rows back in such a transaction must `flushStatusesOnly()` first.
   */
  deferStepWrites = false;
  /**
   * Set on the hot path (batching.ts) from its reads under the run's lock: the step rows it read,
   * and the ready steps not yet queued then, in plan order — all of them when `complete`. With these
   * `dispatch` decides in memory what to queue instead of asking the table. Cleared by
   * `stepRowsWrittenDirectly`: after a write the transaction does not track, dispatch asks again.
   */
  readyAtLock?: { rows: ReadyStepRow[]; complete: boolean };
  readonly knownRows = new Map<string, KnownStepRow>();
  /** Steps queued in this transaction (`markQueued`). */
  readonly queuedHere = new Set<string>();
  /** Steps set ready in this transaction, whatever happened to them after. */
  readonly madeReadyHere = new Set<string>();
  /** Queue marks not yet written. */
  private readonly queueMarks = new Set<string>();

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
    /** `EngineDeps.wakeQueueIn`, for the delayed jobs this transaction queues. */
    private readonly wakeQueueIn?: (delayMs: number) => void,
  ) {
    this.openedWithStatus = run.status;
  }

  /** The run's status when this transaction locked it: a change to a final one may concern other runs. */
  private readonly openedWithStatus: RunStatus;

  setStatus(
    stepId: string,
    status: StepStatus,
    reason?: string,
    data: Omit<StepStatusData, "status" | "reason"> = {},
    waiting: StepWaiting | null = null,
  ): void {
    assertTransition(stepId, this.statuses.get(stepId), status);
    this.statuses.set(stepId, status);
    if (status === "ready") this.madeReadyHere.add(stepId);
    this.updates.set(stepId, { status, reason: reason ?? null, waiting });
    this.events.push({ type: `step.${status}`, stepId, data: { status, ...(reason && { reason }), ...data } });
  }

  /**
   * A status change the caller writes itself (with other columns, in its own statement): checked
   * and remembered like `setStatus`, but neither written nor announced here.
   */
  noteStatus(stepId: string, status: StepStatus): void {
    assertTransition(stepId, this.statuses.get(stepId), status);
    this.statuses.set(stepId, status);
  }

  /**
   * Claims a ready step (ready → running) for `claim.attempt`: checked and remembered like
   * `setStatus`, written with the write-back (or the next flush) in the same statement as the
   * transaction's other step writes. Not announced: the claimer tells `step.running` itself.
   */
  claim(stepId: string, claim: StepClaim): void {
    assertTransition(stepId, this.statuses.get(stepId), "running");
    this.statuses.set(stepId, "running");
    this.updates.set(stepId, { status: "running", reason: null, waiting: null });
    this.claims.set(stepId, claim);
  }

  /**
   * Code that writes step rows itself (not through this class) calls this first: what the hot
   * path read under the lock no longer describes the table, so `dispatch` asks it again.
   */
  stepRowsWrittenDirectly(): void {
    this.readyAtLock = undefined;
  }

  /** Queues a ready step (dispatch), written with the transaction's other step writes. */
  markQueued(stepId: string): void {
    this.queuedHere.add(stepId);
    this.queueMarks.add(stepId);
  }

  /** Whether queue marks wait to be written (a query about queued steps must flush them first). */
  hasQueueMarks(): boolean {
    return this.queueMarks.size > 0;
  }

  /** Steps with a status change not yet written, and which of them are now ready. */
  pendingStatuses(): { changed: string[]; ready: string[] } {
    const changed = [...this.updates.keys()];
    return { changed, ready: changed.filter((id) => this.updates.get(id)!.status === "ready") };
  }

  /** Whether any of `stepIds` has a result or status change not yet written. */
  hasPendingWrites(stepIds: Iterable<string>): boolean {
    for (const id of stepIds) if (this.updates.has(id) || this.results.has(id)) return true;
    return false;
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

  /**
   * Writes step results and status changes made so far, so that queries in this transaction see
   * them: one statement for both (a finishing step usually has both).
   */
  async flushStatusesOnly(): Promise<void> {
    const rows = this.takeStepWrites();
    if (rows === undefined) return;
    await this.client.query(stepWriteSql("$1", "$2"), [this.run.id, rows]);
  }

  /**
   * The write-back at the end of the transaction: queue jobs and timers, then the steps' and the
   * run's rows together with the events in one statement — the round trip every engine
   * transaction pays once rather than three times. With `commitWith` (`inTransaction`'s), the
   * whole write-back and the commit go in one round trip, as `execute`s of the statements this
   * connection has prepared (`preparedExecute`); not the first time a connection sends them.
   */
  async flush(commitWith?: CommitWith): Promise<void> {
    // A wake for a job of a transaction that then rolls back finds nothing due: harmless.
    for (const job of this.jobs) if (job.runAt) this.wakeQueueIn?.(job.runAt.getTime() - this.now.getTime());
    const jobs = stepJobsStatement(this.jobs.splice(0), runEndedJobs(this.run, this.openedWithStatus));
    const timers = approvalTimersStatement(this.timers.splice(0));
    const stepRows = this.takeStepWrites();
    const { run } = this;
    const stream = { streamId: run.id, planId: run.plan_id, runId: run.id, traceId: run.trace_id };
    const events = this.events.splice(0);
    const statement = appendEventsStatement(stream, events, {
      // Read with the run's lock, which a new watcher's mark waits for: a transaction that saw
      // no watcher committed before the watcher reads the stored events.
      live: run.watched || events.some((event) => !QUIET_WHEN_UNWATCHED.has(event.type)),
      alongside: (bind) => {
        const runId = bind(run.id);
        const status = bind(run.status);
        return [
          ...(stepRows === undefined ? [] : [stepWriteSql(runId, bind(stepRows))]),
          `update runs set status = ${status}::text, open_steps = ${bind(run.open_steps)}::int,
             active_steps = ${bind(run.active_steps)}::int,
             finished_at = case when ${status}::text in ('completed','failed','cancelled')
               then coalesce(finished_at, now()) else null end
           where id = ${runId}::uuid`,
        ];
      },
    });
    const statements = [jobs, timers, statement].filter((s): s is Statement => s !== undefined);
    if (commitWith) {
      const executes = statements.map((s) => preparedExecute(this.client, s.text, s.values));
      if (executes.every((e) => e !== undefined)) {
        await commitWith(executes as string[]);
        return;
      }
    }
    for (const s of statements) await this.client.query(s.text, s.values);
    await commitWith?.([]);
  }

  /** The pending results and status changes as one JSON array (undefined when there are none), cleared. */
  private takeStepWrites(): string | undefined {
    if (this.results.size === 0 && this.updates.size === 0 && this.queueMarks.size === 0) return undefined;
    const rows = new Map<
      string,
      { step_id: string; result?: StepResult; claim?: StepClaim; queued?: true } & Partial<StepUpdate>
    >();
    for (const step_id of this.queueMarks) rows.set(step_id, { step_id, queued: true });
    for (const [step_id, result] of this.results) rows.set(step_id, { ...rows.get(step_id), step_id, result });
    for (const [step_id, update] of this.updates) rows.set(step_id, { ...rows.get(step_id), step_id, ...update });
    // A claim stays with its step whatever was set after it (a claim whose arguments could not be
    // resolved fails in the same transaction: its attempt is still the claimed one).
    for (const [step_id, claim] of this.claims) rows.set(step_id, { ...rows.get(step_id), step_id, claim });
    this.results.clear();
    this.updates.clear();
    this.claims.clear();
    this.queueMarks.clear();
    return JSON.stringify([...rows.values()]);
  }
}

/**
 * Applies step writes (a JSON array of {step_id, result?, status?, reason?, waiting?, claim?, queued?})
 * to a run's rows. `queued` marks a step handed to the queue (dispatch). A claim starts its attempt:
 * the step is no longer queued (whether or not it was queued in the same transaction), runs under its worker, and
 * its lease counts from this statement, not from the transaction's start (now()) — a claim that
 * waited for the run's lock has not used up its worker's lease. A tool that marks the start of its
 * effect itself has started none yet; for any other the effect may begin once the claim commits.
 *
 * The step ids are also given as an array (`= any`), which PostgreSQL looks up in the primary key;
 * joined to the record set alone it reads every step of the run, whatever the statistics say.
 */
/** SETTLED_STEP_STATUSES as an SQL array constant: the hot path's write-back binds no more parameters. */
const SETTLED_STATUSES_SQL = `'{${SETTLED_STEP_STATUSES.join(",")}}'::text[]`;

function stepWriteSql(runId: string, rows: string): string {
  return `update run_steps rs set
         result = coalesce(u.result, rs.result),
         error = case when u.result is null then rs.error else u.result->>'error' end,
         progress = case when (u.result->>'ok')::boolean then 100 when u.claim is not null then 0 else rs.progress end,
         attempt = coalesce((u.claim->>'attempt')::int, rs.attempt),
         queued = case when u.claim is not null then false when u.queued then true else rs.queued end,
         started_at = case when u.claim is null then rs.started_at else now() end,
         worker_id = case when u.claim is null then rs.worker_id else (u.claim->>'worker_id')::uuid end,
         effects_started_at = case when u.claim is null then rs.effects_started_at
           when (u.claim->>'marks')::boolean then null else now() end,
         lease_expires_at = case when u.claim is null then rs.lease_expires_at
           else clock_timestamp() + make_interval(secs => (u.claim->>'lease_ms')::int / 1000.0) end,
         status = coalesce(u.status, rs.status),
         reason = case when u.status is null then rs.reason else coalesce(u.reason, rs.reason) end,
         waiting = case when u.status is null then rs.waiting else u.waiting end,
         finished_at = case when u.status = any(${SETTLED_STATUSES_SQL}) then now() else rs.finished_at end
       from jsonb_to_recordset(${rows}::jsonb) as u(step_id text, result jsonb, status text, reason text, waiting jsonb, claim jsonb, queued boolean)
       where rs.run_id = ${runId}::uuid and rs.step_id = u.step_id
         and rs.step_id = any(array(select jsonb_array_elements(${rows}::jsonb)->>'step_id'))`;
}

export async function loadPlanSteps(
  client: Pick<pg.ClientBase, "query">,
  planId: string,
  version: number,
): Promise<Step[]> {
  const row = await client.query<{ steps: Step[] }>(
    "select steps from plan_versions where plan_id = $1 and version = $2",
    [planId, version],
  );
  if (row.rowCount === 0) throw new AppError("not_found", `Plan ${planId} has no version ${version}`);
  return row.rows[0]!.steps;
}

/**
 * A run's row as the engine reads it (`RunRow`): the select of its lock below, or the `returning`
 * of the insert that creates it (`startRun`).
 */
export const RUN_COLUMNS = `id, plan_id, plan_version, status, max_parallel, trace_id, workspace_root, open_steps, active_steps,
  approval_timeout_ms, approval_warning_ms, recovery_policy, parent_run_id, parent_step_id, now() as db_now,
  coalesce(watched_until > now(), false) as watched`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

const RUN_LOCK = `select ${RUN_COLUMNS} from runs where id = $1 for update`;

/**
 * The run-lock statement of `openRunTransaction`, to go in one round trip with `begin`
 * (`inTransaction`'s `openWith`). Undefined for an id that is not a uuid (no such run: the caller
 * then locks as usual and finds none).
 */
export function runLockStatement(runId: string): Statement | undefined {
  return UUID.test(runId) ? { text: RUN_LOCK, values: [runId] } : undefined;
}

/**
 * Locks the run row: every engine transaction on a run is serialised by this lock. With
 * `skipLocked` a run whose lock is held elsewhere is not waited for (undefined, as for no run).
 */
export async function openRunTransaction(
  deps: EngineDeps,
  client: Client,
  runId: string,
  options: {
    skipLocked?: boolean;
    /** The result of `runLockStatement(runId)`, already run in this transaction. */
    locked?: pg.QueryResult;
  } = {},
): Promise<RunTransaction | undefined> {
  const result =
    (options.locked as pg.QueryResult<RunRow> | undefined) ??
    (await client.query<RunRow>(options.skipLocked ? `${RUN_LOCK} skip locked` : RUN_LOCK, [runId]));
  const run = result.rows[0];
  if (!run) return undefined;
  const graph = await deps.graphs.get(run.plan_id, run.plan_version, () =>
    loadPlanSteps(client, run.plan_id, run.plan_version),
  );
  return new RunTransaction(client, run, graph, deps.now?.() ?? run.db_now, deps.wakeQueueIn);
}

export type StepJobRef = { runId: string; stepId: string; attempt: number };

export async function requireRun(deps: EngineDeps, client: Client, runId: string): Promise<RunTransaction> {
  const tx = await openRunTransaction(deps, client, runId);
  if (!tx) throw new AppError("not_found", `No run ${runId}`);
  return tx;
}

export async function audit(
  tx: RunTransaction,
  actor: string,
  action: AuditAction,
  stepId: string | null,
  detail: Record<string, unknown> = {},
) {
  await recordAudit(tx.client, {
    actor,
    action,
    planId: tx.run.plan_id,
    planVersion: tx.run.plan_version,
    runId: tx.run.id,
    stepId,
    detail,
  });
}
