import type pg from "pg";
import { FINISHED_RUN_STATUSES } from "../vocabulary";
import { logger } from "../logger";

const log = logger.child({ component: "retention" });

/**
 * Events kept whatever their age: they are records, not history. `audit verify` finds task merges
 * by their `task.merged` event, and the run page and the agent's brief read a task's latest
 * verification from `task.verified`. A handful per run at most.
 */
export const KEPT_EVENT_TYPES = ["task.merged", "task.verified"] as const;

/** Rows one transaction deletes: small enough that no lock is held for long. */
export const DEFAULT_RETENTION_BATCH = 1_000;

/** Runs looked up per round of a pass. */
const RUNS_PER_ROUND = 100;

export interface RetentionBatch {
  runId: string;
  /** Events (step logs included: they are `step.log` events) this transaction deleted. */
  deleted: number;
  /** The transaction marked the run as done (`runs.events_removed_at`). */
  finished: boolean;
  ms: number;
}

export interface RetentionOptions {
  /** Runs that finished more than this many days ago lose their events and step logs. */
  olderThanDays: number;
  /** Events deleted per transaction. */
  batchSize?: number;
  /** The pass stops after this long (it resumes where it stopped the next time). */
  budgetMs?: number;
  /** Told of every transaction the pass commits. */
  onBatch?: (batch: RetentionBatch) => void;
}

export interface RetentionReport {
  runs: number;
  events: number;
  transactions: number;
  longestTransactionMs: number;
  /** Stopped by its budget with runs still to do. */
  more: boolean;
}

/**
 * One retention pass: for every run finished (completed, failed or cancelled) more than
 * `olderThanDays` ago whose events are still there, delete its events in transactions of
 * `batchSize` rows, and in the last one stamp `runs.events_removed_at`. The run, its steps (states,
 * results, errors), its event stream's counter and the whole audit log stay: the run list, the run
 * page's header and `audit verify` answer as before. Deleting by the events' primary key, a batch
 * locks only the rows it removes, and a finished run has no writer to wait for.
 */
export async function runRetentionPass(pool: pg.Pool, options: RetentionOptions): Promise<RetentionReport> {
  const batchSize = options.batchSize ?? DEFAULT_RETENTION_BATCH;
  const deadline = options.budgetMs === undefined ? Infinity : Date.now() + options.budgetMs;
  const report: RetentionReport = { runs: 0, events: 0, transactions: 0, longestTransactionMs: 0, more: false };
  for (;;) {
    const due = await pool.query<{ id: string }>(
      `select id from runs
        where status = any($1) and finished_at < now() - make_interval(secs => $2) and events_removed_at is null
        order by finished_at limit $3`,
      [FINISHED_RUN_STATUSES, options.olderThanDays * 86_400, RUNS_PER_ROUND],
    );
    for (const { id } of due.rows) {
      if (Date.now() >= deadline) return { ...report, more: true };
      for (let finished = false; !finished;) {
        if (Date.now() >= deadline) return { ...report, more: true };
        const batch = await deleteBatch(pool, id, batchSize);
        finished = batch.finished;
        report.transactions++;
        report.events += batch.deleted;
        report.longestTransactionMs = Math.max(report.longestTransactionMs, batch.ms);
        options.onBatch?.(batch);
      }
      report.runs++;
    }
    if (due.rows.length < RUNS_PER_ROUND) return report;
  }
}

/**
 * One transaction: delete up to `batchSize` of the run's events by primary key; when fewer were
 * left, stamp the run as done — in a second statement, whose fresh snapshot sees the deletes other
 * workers' passes committed meanwhile, and only when no removable event is left, so two passes
 * over one run cannot stamp it while events remain. The run is re-checked as finished in each
 * statement: one re-opened (a failed step retried) since the look-up is left alone.
 */
async function deleteBatch(pool: pg.Pool, runId: string, batchSize: number): Promise<RetentionBatch> {
  const started = performance.now();
  const client = await pool.connect();
  let row: { deleted: number; open: number };
  let marked = false;
  try {
    await client.query("begin");
    const result = await client.query<{ deleted: number; open: number }>(
      `with run as (
         select id from runs where id = $1::uuid and status = any($4) and events_removed_at is null
       ), gone as (
         delete from events
          where stream_id = $1::text and exists (select 1 from run)
            and seq = any(array(select seq from events where stream_id = $1::text and not (type = any($3))
                                order by seq limit $2))
         returning 1
       )
       select (select count(*)::int from gone) as deleted, (select count(*)::int from run) as open`,
      [runId, batchSize, KEPT_EVENT_TYPES, FINISHED_RUN_STATUSES],
    );
    row = result.rows[0]!;
    if (row.open > 0 && row.deleted < batchSize) {
      const stamped = await client.query(
        `update runs set events_removed_at = now()
          where id = $1::uuid and status = any($3) and events_removed_at is null
            and not exists (select 1 from events where stream_id = $1::text and not (type = any($2)))`,
        [runId, KEPT_EVENT_TYPES, FINISHED_RUN_STATUSES],
      );
      marked = (stamped.rowCount ?? 0) > 0;
    }
    await client.query("commit");
  } catch (error) {
    await client.query("rollback").catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
  const ms = performance.now() - started;
  // A run no longer finished (or stamped by another worker's pass) is done with, for this pass.
  return { runId, deleted: row.deleted, finished: marked || row.open === 0, ms };
}

/**
 * Retention as a worker's maintenance: on a heartbeat tick, a pass of at most `budgetMs` (so
 * recovery on the next tick is not held up), every `intervalMs` — or on the next tick while a
 * backlog remains (the first pass after turning retention on, over months of runs).
 */
export function retentionWork(
  pool: pg.Pool,
  options: { olderThanDays: number; intervalMs?: number; budgetMs?: number; batchSize?: number },
): { maintain(): Promise<void> } {
  const intervalMs = options.intervalMs ?? 10 * 60_000;
  let nextAt = 0;
  return {
    async maintain() {
      if (Date.now() < nextAt) return;
      const report = await runRetentionPass(pool, {
        olderThanDays: options.olderThanDays,
        batchSize: options.batchSize,
        budgetMs: options.budgetMs ?? 2_000,
      });
      nextAt = report.more ? 0 : Date.now() + intervalMs;
      if (report.events > 0 || report.runs > 0) {
        log.info(
          { runs: report.runs, events: report.events, longestTransactionMs: Math.round(report.longestTransactionMs) },
          "retention removed events of finished runs",
        );
      }
    },
  };
}
