import type pg from "pg";
import type { Statement } from "../db";
import type { StepStatus } from "../plans/schema";
import type { RunGraph } from "./graph";
import type { RunRow, RunTransaction } from "./run-transaction";

/**
 * Optimistic step transactions. A claim/outcome transaction (batching.ts) reads three things under
 * the run's lock — the run's row, the rows of the steps it is about, and the ready steps not yet
 * queued — then decides in memory and writes back. When this process made the run's last
 * transaction itself (a chain running here, a run only this worker serves), it already knows what
 * those reads will return: what that transaction read and wrote. It then decides from that
 * prediction and sends everything in one round trip — `begin`, the run's lock, a check that the
 * three reads return exactly what was predicted (`stepwise_expect`, which ends the transaction
 * before any write otherwise), the write-back and `commit`.
 *
 * Why that is the same transaction: every value the decision used is either one of those reads,
 * checked under the same lock as the usual path would read it, or refused — any other query the
 * decision would make (approvals, referenced outputs, a signal, a step row not predicted) throws
 * `NeedsRead` before anything is sent, and the batch goes the usual way. The one value not read is
 * the database's clock: estimated as the last reading plus this process's monotonic time since, and
 * a decision that sets a deadline from it (an approval timer) goes the usual way too.
 */

/** A step row as the hot path reads it under the run's lock. */
export type StatusRow = { step_id: string; status: StepStatus; attempt: number; queued: boolean; position: number };
/** A ready step not yet queued, as the hot path reads it under the run's lock. */
export type ReadyRow = { step_id: string; attempt: number; position: number };

export interface Prediction {
  graph: RunGraph;
  /** The run's row after the last transaction; `db_now` the database's time then (estimated or read). */
  run: RunRow;
  /** `performance.now()` at `run.db_now`. */
  at: number;
  /** The step rows that transaction read, as it left them. */
  rows: Map<string, StatusRow>;
  /** Every ready, unqueued step after it, in plan order. */
  ready: ReadyRow[];
}

/** The decision needs a read the prediction cannot answer: nothing was sent, go the usual way. */
export class NeedsRead extends Error {
  constructor() {
    super("An optimistic step transaction needed a read of its own");
  }
}

/** The check in the transaction found the reads otherwise than predicted (see `stepwise_expect`). */
export function isStalePrediction(error: unknown): boolean {
  return (error as { code?: unknown } | undefined)?.code === "SW001";
}

/** `client` for a decision made from a prediction: every query refused with `NeedsRead`. */
export function refusingReads<T extends object>(client: T): T {
  return Object.create(client, { query: { value: () => Promise.reject(new NeedsRead()) } }) as T;
}

/**
 * How many ready, unqueued steps the hot path reads under the lock: as many as the run had free
 * slots then, plus one per op of the batch (an outcome frees a slot) — `dispatch` can fill its
 * slots from them without asking again, and asks when it cannot (see `readyInMemory`).
 */
export function readyAtLockLimit(run: { max_parallel: number; active_steps: number }, ops: number): number {
  return Math.max(0, run.max_parallel - run.active_steps) + ops;
}

/**
 * What the run's rows will be after `tx` commits, from what it read and changed; undefined when it
 * does not know (it wrote rows itself, read the ready steps only in part, or made a step ready
 * whose row it never read).
 */
export function predictAfter(tx: RunTransaction, at: number): Prediction | undefined {
  const atLock = tx.readyAtLock;
  if (!atLock?.complete) return undefined;
  const read = new Map<string, { attempt: number; queued: boolean; position: number }>(tx.knownRows);
  for (const row of atLock.rows) if (!read.has(row.step_id)) read.set(row.step_id, { ...row, queued: false });
  const rows = new Map<string, StatusRow>();
  for (const [stepId, row] of read) {
    const claimed = tx.claimedHere.get(stepId);
    rows.set(stepId, {
      step_id: stepId,
      status: tx.statuses.get(stepId) ?? "ready",
      attempt: claimed ?? row.attempt,
      queued: claimed === undefined && (row.queued || tx.queuedHere.has(stepId)),
      position: row.position,
    });
  }
  for (const stepId of tx.madeReadyHere) {
    if (tx.statuses.get(stepId) === "ready" && !rows.has(stepId)) return undefined;
  }
  const ready = [...rows.values()]
    .filter((row) => row.status === "ready" && !row.queued)
    .sort((a, b) => a.position - b.position || (a.step_id < b.step_id ? -1 : 1))
    .map(({ step_id, attempt, position }) => ({ step_id, attempt, position }));
  return { graph: tx.graph, run: { ...tx.run }, at, rows, ready };
}

/**
 * The three reads of a transaction on `runId` about `stepIds` as the prediction has them, and the
 * statement that checks them under the lock. A step row the prediction does not hold is guessed
 * as never started (pending, attempt 0, unqueued) — the check settles whether it is. `reads()`
 * answers with fresh rows at each call: a transaction changes the run's row it was given, and a
 * try rolled back (a lock timeout) must start again from the prediction, as the usual path starts
 * again from its reads.
 */
export function predictedReads(
  prediction: Prediction,
  runId: string,
  stepIds: string[],
  ops: number,
): { reads(): { locked: pg.QueryResult; readyAtLock: pg.QueryResult; statuses: pg.QueryResult }; guard: Statement } {
  const run: RunRow = {
    ...prediction.run,
    db_now: new Date(prediction.run.db_now.getTime() + (performance.now() - prediction.at)),
  };
  const limit = readyAtLockLimit(run, ops);
  const ready = prediction.ready.slice(0, limit);
  const rows = stepIds.map(
    (stepId): StatusRow =>
      prediction.rows.get(stepId) ?? {
        step_id: stepId,
        status: "pending",
        attempt: 0,
        queued: false,
        position: prediction.graph.positions.get(stepId) ?? -1,
      },
  );
  const result = <R extends object>(list: R[]) =>
    ({ rows: list.map((row) => ({ ...row })), rowCount: list.length }) as unknown as pg.QueryResult;
  return {
    reads: () => ({ locked: result([run]), readyAtLock: result(ready), statuses: result(rows) }),
    guard: {
      text: EXPECT_READS,
      values: [
        runId,
        JSON.stringify([
          run.status,
          run.plan_id,
          run.plan_version,
          run.max_parallel,
          run.open_steps,
          run.active_steps,
          run.trace_id,
          run.workspace_root,
          run.approval_timeout_ms,
          run.approval_warning_ms,
          run.recovery_policy,
        ]),
        stepIds,
        JSON.stringify(
          Object.fromEntries(rows.map((row) => [row.step_id, [row.status, row.attempt, row.queued, row.position]])),
        ),
        limit,
        JSON.stringify(Object.fromEntries(ready.map((row) => [row.step_id, [row.attempt, row.position]]))),
      ],
    },
  };
}

/**
 * The check: the run's row, the steps' rows and the ready steps (the same reads as the usual path,
 * after the run's lock) are exactly as predicted. Rows compare as JSON objects keyed by step, so
 * order does not matter.
 */
const EXPECT_READS = `select stepwise_expect(
    (select jsonb_build_array(status, plan_id, plan_version, max_parallel, open_steps, active_steps, trace_id,
       workspace_root, approval_timeout_ms, approval_warning_ms, recovery_policy) from runs where id = $1) = $2::jsonb
    and (select coalesce(jsonb_object_agg(step_id, jsonb_build_array(status, attempt, queued, position)), '{}')
         from run_steps where run_id = $1 and step_id = any($3::text[])) = $4::jsonb
    and (select coalesce(jsonb_object_agg(step_id, jsonb_build_array(attempt, position)), '{}')
         from (select step_id, attempt, position from run_steps
               where run_id = $1 and status = 'ready' and not queued order by position, step_id limit $5) ready) = $6::jsonb,
    'run ' || $1::text)`;
