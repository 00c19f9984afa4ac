import { inTransaction, type CommitWith, type Statement } from "../db";
import { retryOnConnectionLoss } from "../database-faults";
import type { StepStatus } from "../plan-schema";
import { advance } from "./advance";
import { claimContinuations, claimStepsIn, ContinuationClaims, type ClaimedStep, type OpResult } from "./claim";
import type { EngineDeps } from "./deps";
import { recordOutcomeIn, type Outcome } from "./outcome";
import type { QueryResult } from "pg";
import type { RunGraph } from "./graph";
import {
  openRunTransaction,
  runLockStatement,
  type Client,
  type ReadyStepRow,
  type StepJobRef,
} from "./run-transaction";

export type EngineOp =
  | { kind: "claim"; job: StepJobRef }
  | {
      kind: "record";
      job: StepJobRef;
      attempt: number;
      outcome: Outcome;
      duration: number;
      /** The step ran as a continuation: its slot, free once this is written, may go to a dependent. */
      heldSlot?: boolean;
    };

/**
 * Every engine transaction on a run holds the run's row lock, so under load a process's claims and
 * completions on one run would queue for it one by one. The combiner instead runs one transaction
 * per run at a time and hands it everything that arrived meanwhile: many claims and outcomes share
 * one lock acquisition, one status read, one dispatch and one event append. With no contention a
 * request runs at once, so it adds no latency.
 */
export class RunCombiner {
  private readonly pending = new Map<
    string,
    { op: EngineOp; resolve: (value: unknown) => void; reject: (error: unknown) => void }[]
  >();
  private readonly busy = new Set<string>();
  /** The plan version each run had at its last transaction here: its graph names what to read. */
  private readonly plans = new Map<string, { planId: string; version: number }>();

  constructor(
    private readonly deps: EngineDeps,
    /** Starts a continuation this process claimed, once its claim has committed. */
    private readonly startContinuation: (claimed: ClaimedStep) => void,
  ) {}

  submit<T>(runId: string, op: EngineOp): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const queue = this.pending.get(runId) ?? [];
      queue.push({ op, resolve: resolve as (value: unknown) => void, reject });
      this.pending.set(runId, queue);
      if (this.busy.has(runId)) return;
      this.busy.add(runId);
      // Begun once this turn of the event loop is over, so that the outcomes of steps finishing
      // together (timers due in the same turn: a layer of equal steps) share one transaction
      // rather than the first going alone while the rest wait for it.
      setImmediate(() => void this.drain(runId));
    });
  }

  private async drain(runId: string): Promise<void> {
    try {
      for (let batch = this.take(runId); batch.length > 0; batch = this.take(runId)) {
        try {
          // A lost connection rolls the batch back (a commit that went through before it is
          // settled as committed in `attempt`); every op re-checks state, so it is retried whole
          // until written — a finished step must not stay "running" because of a cut.
          const { results, continuations } = await retryOnConnectionLoss(() => this.attempt(runId, batch), {
            shouldStop: () => this.deps.stopping === true,
          });
          batch.forEach((entry, index) => {
            const result = results[index]!;
            if (result.ok) entry.resolve(result.value);
            else entry.reject(result.error);
          });
          // Only now, with the claims committed, are the continuations this process's to run.
          for (const claimed of continuations) this.startContinuation(claimed);
        } catch (error) {
          for (const entry of batch) entry.reject(error);
        }
      }
    } finally {
      this.busy.delete(runId);
    }
  }

  /**
   * One transaction for `batch`, which `inTransaction` may try several times; the continuations
   * it claims are those of the try that committed (`ContinuationClaims`).
   */
  private async attempt(runId: string, batch: { op: EngineOp }[]) {
    const claims = new ContinuationClaims(this.deps.continuationSlots);
    try {
      const ops = batch.map((entry) => entry.op);
      // `begin`, the run's lock, the ready steps not yet queued and — when the run's plan graph is
      // known from its last transaction here — the status read, in one round trip. processOps uses
      // that read only if the run turns out to still have that graph; otherwise it reads again.
      const lock = runLockStatement(runId);
      const known = this.plans.get(runId);
      const graph = known && this.deps.graphs.peek(known.planId, known.version, runId);
      const openWith = lock && [
        lock,
        readyAtLockStatement(runId, ops.length),
        ...(graph ? [statusReadStatement(runId, statusReadIds(graph, ops))] : []),
      ];
      const seen: { planId?: string; version?: number } = {};
      const results = await inTransaction(
        this.deps.pool,
        async (client, opened, commitWith) => {
          return processOps(this.deps, client, runId, ops, claims.nextTry(), {
            locked: opened?.[0],
            readyAtLock: opened?.[1],
            statuses: graph && opened?.[2] ? { graph, result: opened[2] } : undefined,
            seen,
            commitWith,
          });
        },
        // A claim whose commit's answer was lost is still this process's to run: were the batch
        // tried again, it would find its steps running and start none of them.
        { openWith, settleLostCommit: { shouldStop: () => this.deps.stopping === true } },
      );
      this.remember(runId, seen);
      return { results, continuations: claims.committed };
    } catch (error) {
      claims.release();
      throw error;
    }
  }

  /** Notes the plan version `runId` had at its last transaction (see `plans`). */
  remember(runId: string, seen: { planId?: string; version?: number }) {
    if (!seen.planId || seen.version === undefined) return;
    this.plans.delete(runId);
    this.plans.set(runId, { planId: seen.planId, version: seen.version });
    // Bounded: the oldest entries go first (an entry only saves a round trip).
    if (this.plans.size > 1000) this.plans.delete(this.plans.keys().next().value!);
  }

  private take(runId: string) {
    const batch = this.pending.get(runId) ?? [];
    this.pending.delete(runId);
    return batch;
  }
}

/**
 * One transaction for a batch of claims and outcomes on one run; outcomes first, as they free slots.
 * Dependents claimed as continuations are pushed to `continuations`; the caller starts them after
 * the commit.
 */
export async function processOps(
  deps: EngineDeps,
  client: Client,
  runId: string,
  ops: EngineOp[],
  continuations: ClaimedStep[],
  opened: {
    /** The run's row, already locked by `runLockStatement` in this transaction. */
    locked?: QueryResult;
    /** `readyAtLockStatement(runId, ops.length)`, run after the lock in this transaction. */
    readyAtLock?: QueryResult;
    /** `statusReadStatement` for `graph`'s `statusReadIds`, run after the lock in this transaction. */
    statuses?: { graph: RunGraph; result: QueryResult };
    /** Filled with the run's plan version, for the next transaction's read. */
    seen?: { planId?: string; version?: number };
    /** Sends the write-back with the commit (`inTransaction`'s): the transaction ends here. */
    commitWith?: CommitWith;
  } = {},
): Promise<OpResult[]> {
  const results: OpResult[] = ops.map(() => ({ ok: true, value: undefined }));
  const tx = await openRunTransaction(deps, client, runId, { locked: opened.locked });
  if (!tx) return results;
  if (opened.seen) Object.assign(opened.seen, { planId: tx.run.plan_id, version: tx.run.plan_version });
  tx.deferStepWrites = true;
  if (opened.readyAtLock) {
    const rows = opened.readyAtLock.rows as ReadyStepRow[];
    tx.readyAtLock = { rows, complete: rows.length < readyAtLockLimit(tx.run, ops.length) };
  }
  const records = ops.flatMap((op, index) => (op.kind === "record" ? [{ op, index }] : []));
  const claims = ops.flatMap((op, index) => (op.kind === "claim" ? [{ op, index }] : []));
  const opSteps = new Set(ops.map((op) => op.job.stepId));
  const current =
    opened.statuses?.graph === tx.graph
      ? (opened.statuses.result as QueryResult<StatusRow>)
      : await tx.client.query<StatusRow>(STATUS_READ, [runId, statusReadIds(tx.graph, ops)]);
  const rows = new Map(
    current.rows
      .filter((row) => opSteps.has(row.step_id))
      .map((row) => [row.step_id, { status: row.status, attempt: row.attempt }]),
  );
  for (const row of current.rows) {
    tx.statuses.set(row.step_id, row.status);
    tx.knownRows.set(row.step_id, { attempt: row.attempt, queued: row.queued, position: row.position });
  }

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
  // A continuation whose outcome this writes gives its slot up right after the commit: its
  // dependents may have it now, or a layer of continuations would hand its successors to the queue.
  const handedOver = records.filter(({ op }) => op.kind === "record" && op.heldSlot).length;
  continuations.push(...(await claimContinuations(deps, tx, rows, handedOver)));

  if (claims.length > 0) {
    const claimed = await claimStepsIn(
      deps,
      tx,
      claims.map(({ op }) => op.job),
      rows,
    );
    claims.forEach(({ index }, i) => (results[index] = claimed[i]!));
  }
  deps.beforeCommit?.(runId, ops);
  await tx.flush(opened.commitWith);
  return results;
}

/**
 * The steps whose rows a batch reads after the lock: its own, and what `advance` will look at once
 * its outcomes settle — their dependents and those dependents' dependencies — saving it a round trip.
 */
function statusReadIds(graph: RunGraph, ops: EngineOp[]): string[] {
  const nearby = ops.flatMap((op) =>
    op.kind === "record"
      ? (graph.dependents.get(op.job.stepId) ?? []).flatMap((id) => [id, ...graph.steps.get(id)!.dependsOn])
      : [],
  );
  return [...new Set([...ops.map((op) => op.job.stepId), ...nearby])];
}

/** The status read, to go with `begin` and the lock. */
function statusReadStatement(runId: string, stepIds: string[]): Statement {
  return { text: STATUS_READ, values: [runId, stepIds] };
}

const STATUS_READ =
  "select step_id, status, attempt, queued, position from run_steps where run_id = $1 and step_id = any($2::text[])";

type StatusRow = { step_id: string; status: StepStatus; attempt: number; queued: boolean; position: number };

/**
 * How many ready, unqueued steps the hot path reads under the lock: as many as the run had free
 * slots then, plus one per op of the batch (an outcome frees a slot) — `dispatch` can fill its
 * slots from them without asking again, and asks when it cannot (see `readyInMemory`).
 */
function readyAtLockLimit(run: { max_parallel: number; active_steps: number }, ops: number): number {
  return Math.max(0, run.max_parallel - run.active_steps) + ops;
}

/** `readyAtLockLimit`'s read (the run's row is locked by the statement before it). */
function readyAtLockStatement(runId: string, ops: number): Statement {
  return {
    text: `select step_id, attempt, position from run_steps
      where run_id = $1 and status = 'ready' and not queued order by position
      limit (select greatest(0, max_parallel - active_steps) + $2::int from runs where id = $1)`,
    values: [runId, ops],
  };
}
