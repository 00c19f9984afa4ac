import type pg from "pg";
import type { AuditAction } from "../audit/actions";
import { recordAudit } from "../audit/audit-log";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import type { NewEvent, StepStatusData } from "../events/types";
import type { Step, StepResult, StepStatus } from "../plans/schema";
import type { EngineDeps } from "./deps";
import type { RunGraph } from "./graph";
import { enqueueApprovalTimers, enqueueStepJobs, type ApprovalTimerJob, type StepJob } from "./queue";
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
}

/**
 * What a step in awaiting_approval, awaiting_input or awaiting_agent waits for — or, for an agent
 * task in progress, which agent holds it. Shown to people and checked by timers.
 */
export type StepWaiting =
  | { kind: "approval"; expiresAt: string }
  | { kind: "input"; question: string; choices?: string[] }
  | { kind: "agent"; agent?: string; since?: string };

interface StepUpdate {
  status: StepStatus;
  reason?: string | null;
  waiting: StepWaiting | null;
}

/** Everything one engine transaction knows and changes about a run; written back once at the end. */
export class RunTransaction {
  readonly events: NewEvent[] = [];
  readonly jobs: StepJob[] = [];
  readonly timers: ApprovalTimerJob[] = [];
  readonly statuses = new Map<string, StepStatus>();
  /** Final results, written with the status changes in one statement. */
  private readonly results = new Map<string, StepResult>();
  private readonly updates = new Map<string, StepUpdate>();

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
    data: Omit<StepStatusData, "status" | "reason"> = {},
    waiting: StepWaiting | null = null,
  ): void {
    assertTransition(stepId, this.statuses.get(stepId), status);
    this.statuses.set(stepId, status);
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
   * transaction pays once rather than three times.
   */
  async flush(): Promise<void> {
    await enqueueStepJobs(this.client, this.jobs.splice(0));
    await enqueueApprovalTimers(this.client, this.timers.splice(0));
    const stepRows = this.takeStepWrites();
    const { run } = this;
    await appendEvents(
      this.client,
      { streamId: run.id, planId: run.plan_id, runId: run.id, traceId: run.trace_id },
      this.events.splice(0),
      (bind) => {
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
    );
  }

  /** The pending results and status changes as one JSON array (undefined when there are none), cleared. */
  private takeStepWrites(): string | undefined {
    if (this.results.size === 0 && this.updates.size === 0) return undefined;
    const rows = new Map<string, { step_id: string; result?: StepResult } & Partial<StepUpdate>>();
    for (const [step_id, result] of this.results) rows.set(step_id, { step_id, result });
    for (const [step_id, update] of this.updates) rows.set(step_id, { ...rows.get(step_id), step_id, ...update });
    this.results.clear();
    this.updates.clear();
    return JSON.stringify([...rows.values()]);
  }
}

/** Applies step writes (a JSON array of {step_id, result?, status?, reason?, waiting?}) to a run's rows. */
function stepWriteSql(runId: string, rows: string): string {
  return `update run_steps rs set
         result = coalesce(u.result, rs.result),
         error = case when u.result is null then rs.error else u.result->>'error' end,
         progress = case when (u.result->>'ok')::boolean then 100 else rs.progress end,
         status = coalesce(u.status, rs.status),
         reason = case when u.status is null then rs.reason else coalesce(u.reason, rs.reason) end,
         waiting = case when u.status is null then rs.waiting else u.waiting end,
         finished_at = case when u.status in ('completed','failed','blocked','skipped','cancelled') then now() else rs.finished_at end
       from jsonb_to_recordset(${rows}::jsonb) as u(step_id text, result jsonb, status text, reason text, waiting jsonb)
       where rs.run_id = ${runId}::uuid and rs.step_id = u.step_id`;
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
 * Locks the run row: every engine transaction on a run is serialised by this lock. With
 * `skipLocked` a run whose lock is held elsewhere is not waited for (undefined, as for no run).
 */
export async function openRunTransaction(
  deps: EngineDeps,
  client: Client,
  runId: string,
  options: { skipLocked?: boolean } = {},
): Promise<RunTransaction | undefined> {
  const result = await client.query<RunRow>(
    `select id, plan_id, plan_version, status, max_parallel, trace_id, workspace_root, open_steps, active_steps,
            approval_timeout_ms, approval_warning_ms, recovery_policy, now() as db_now
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
