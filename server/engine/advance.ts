import type { StepStatus } from "../plan-schema";
import { FAILED_STEP_STATUSES, FINISHED_RUN_STATUSES, isIn, SETTLED_STEP_STATUSES } from "../vocabulary";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { APPROVAL_EXPIRY_TASK, APPROVAL_WARNING_TASK } from "../queue/jobs";
import type { ReadyStepRow, RunTransaction } from "./run-transaction";
import { decidePending, freeSlots } from "./scheduler";

/**
 * Propagates the consequences of steps that just settled: dependents become ready, wait for
 * approval, are blocked or skipped — transitively — then free slots are filled and the run is
 * finished when nothing is left open.
 */
export async function advance(tx: RunTransaction, settled: string[], alsoConsider: string[] = []): Promise<void> {
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
export function makeReady(tx: RunTransaction, stepId: string): void {
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
export function requestApproval(tx: RunTransaction, stepId: string, now = tx.now, reason?: string): void {
  const { approval_timeout_ms: timeoutMs, approval_warning_ms: warningMs } = tx.run;
  const expiresAt = new Date(now.getTime() + timeoutMs).toISOString();
  tx.setStatus(stepId, "awaiting_approval", reason, { expiresAt }, { kind: "approval", expiresAt });
  tx.events.push({
    type: "approval.requested",
    stepId,
    data: { planVersion: tx.run.plan_version, expiresAt, ...(reason && { reason }) },
  });
  const timer = { runId: tx.run.id, stepId, expiresAt };
  tx.timers.push({ ...timer, task: APPROVAL_EXPIRY_TASK, runAt: new Date(expiresAt) });
  if (warningMs > 0 && warningMs < timeoutMs) {
    tx.timers.push({ ...timer, task: APPROVAL_WARNING_TASK, runAt: new Date(now.getTime() + timeoutMs - warningMs) });
  }
}

/** Queues ready steps, in plan order, up to the run's parallelism limit. */
export async function dispatch(tx: RunTransaction): Promise<void> {
  if (tx.run.status !== "running") return;
  const slots = freeSlots(tx.run.max_parallel, tx.run.active_steps);
  if (slots === 0) return;
  let queued = readyInMemory(tx, slots);
  if (queued) {
    if (CHECK_DISPATCH) await assertSameAsTable(tx, slots, queued);
    for (const row of queued) tx.markQueued(row.step_id);
  } else {
    queued = await queueFromTable(tx, slots);
  }
  for (const row of queued) {
    tx.jobs.push({ runId: tx.run.id, stepId: row.step_id, attempt: row.attempt + 1 });
  }
  tx.run.active_steps += queued.length;
}

/**
 * Under test (or with STEPWISE_CHECK_DISPATCH=1) every in-memory dispatch is checked against the
 * table's answer, so an engine path that changes step rows behind the transaction's back (without
 * `stepRowsWrittenDirectly`) fails the test that takes it. Not by default: it costs a round trip.
 */
const CHECK_DISPATCH = process.env.NODE_ENV === "test" || process.env.STEPWISE_CHECK_DISPATCH === "1";

/**
 * The hot path's dispatch without a round trip: what `queueFromTable` would pick, decided from the
 * rows read under the run's lock (`RunTransaction.readyAtLock`, `knownRows`) and what this
 * transaction changed since. Undefined when those do not settle it — the reads were invalidated, a
 * step made ready here was not among the rows read, or more steps may be ready than were read —
 * and the caller asks the table.
 */
function readyInMemory(tx: RunTransaction, slots: number): { step_id: string; attempt: number }[] | undefined {
  const atLock = tx.readyAtLock;
  if (!atLock) return undefined;
  const candidates = new Map<string, ReadyStepRow>();
  // Ready and unqueued when the lock was taken, unless changed (claimed, held, cancelled) or queued since.
  for (const row of atLock.rows) {
    if ((tx.statuses.get(row.step_id) ?? "ready") === "ready" && !tx.queuedHere.has(row.step_id)) {
      candidates.set(row.step_id, row);
    }
  }
  const last = atLock.rows.at(-1)?.position ?? -1;
  for (const id of tx.madeReadyHere) {
    if (tx.statuses.get(id) !== "ready" || tx.queuedHere.has(id) || candidates.has(id)) continue;
    const known = tx.knownRows.get(id);
    if (!known) return undefined;
    if (!known.queued) candidates.set(id, { step_id: id, attempt: known.attempt, position: known.position });
  }
  const sorted = [...candidates.values()].sort((a, b) => a.position - b.position);
  // Steps ready at the lock beyond those read sort after the last one read: the pick is exact only
  // if it fills its slots before reaching them.
  if (!atLock.complete && sorted.filter((c) => c.position <= last).length < slots) return undefined;
  return sorted.slice(0, slots).map(({ step_id, attempt }) => ({ step_id, attempt }));
}

/**
 * The ready steps not yet queued, by plan order, marked queued in the table. Steps made ready in
 * this transaction may not be written yet: written first, or — on the hot path, which writes them
 * with the write-back — read around. A step whose status changed here counts as ready exactly
 * when its new status is.
 */
async function queueFromTable(tx: RunTransaction, slots: number): Promise<{ step_id: string; attempt: number }[]> {
  if (!tx.deferStepWrites || tx.hasQueueMarks()) await tx.flushStatusesOnly();
  const { changed, ready: madeReady } = tx.pendingStatuses();
  // Two index lookups — ready steps by (run, status), those made ready here by primary key — and
  // the update by primary key: a form that reads only those rows, not every step of the run.
  const ready = await tx.client.query<{ step_id: string; attempt: number }>(
    `update run_steps set queued = true where run_id = $1 and step_id = any(array(
       select step_id from (${READY_UNQUEUED}) candidates order by position limit $2
     )) returning step_id, attempt`,
    [tx.run.id, slots, changed, madeReady],
  );
  for (const row of ready.rows) tx.queuedHere.add(row.step_id);
  return ready.rows;
}

/** Ready, unqueued steps of run $1, reading around pending status changes ($3 changed, $4 now ready). */
const READY_UNQUEUED = `select step_id, attempt, position from run_steps
    where run_id = $1 and status = 'ready' and not queued and step_id <> all($3::text[])
  union all
  select step_id, attempt, position from run_steps where run_id = $1 and step_id = any($4::text[]) and not queued`;

async function assertSameAsTable(tx: RunTransaction, slots: number, picked: { step_id: string }[]): Promise<void> {
  const { changed, ready: madeReady } = tx.pendingStatuses();
  const table = await tx.client.query<{ step_id: string }>(
    `select step_id from (${READY_UNQUEUED}) candidates where step_id <> all($5::text[]) order by position limit $2`,
    [tx.run.id, slots, changed, madeReady, [...tx.queuedHere]],
  );
  const expected = table.rows.map((row) => row.step_id).join(",");
  const got = picked.map((row) => row.step_id).join(",");
  if (expected !== got) {
    throw new Error(`In-memory dispatch picked [${got}] where the table says [${expected}] (run ${tx.run.id})`);
  }
}

/** Whether run $1 has a failed or blocked step ($3: FAILED_STEP_STATUSES) among those not in $2. */
const FAILED_UNCHANGED = `select 1 from run_steps
  where run_id = $1 and status = any($3) and step_id <> all($2::text[]) limit 1`;

export async function finishIfDone(tx: RunTransaction): Promise<void> {
  const { run } = tx;
  if (isIn(FINISHED_RUN_STATUSES, run.status)) return;
  if (run.status === "failing" && run.active_steps === 0) {
    await cancelOpenSteps(tx, "A critical step failed");
    run.status = "failed";
    tx.events.push({ type: "run.failed", data: { status: "failed", reason: "A critical step failed" } });
    return;
  }
  if (run.open_steps > 0) return;
  // Statuses changed in this transaction may not be written yet (the hot path writes them with
  // its write-back): those are judged here, the table is asked about the others.
  const { changed } = tx.pendingStatuses();
  const failed =
    changed.some((id) => isIn(FAILED_STEP_STATUSES, tx.statuses.get(id)!)) ||
    (await tx.client.query(FAILED_UNCHANGED, [run.id, changed, FAILED_STEP_STATUSES])).rowCount! > 0;
  run.status = failed ? "failed" : "completed";
  tx.events.push({ type: `run.${run.status}`, data: { status: run.status } });
}

export async function cancelOpenSteps(tx: RunTransaction, reason: string): Promise<void> {
  await tx.flushStatusesOnly();
  const open = await tx.client.query<{ step_id: string; status: StepStatus }>(
    `select step_id, status from run_steps where run_id = $1 and status <> all($2) order by position`,
    [tx.run.id, SETTLED_STEP_STATUSES],
  );
  for (const row of open.rows) {
    tx.statuses.set(row.step_id, row.status);
    tx.setStatus(row.step_id, "cancelled", reason);
  }
  tx.run.open_steps -= open.rows.length;
}

/** Steps blocked, directly or transitively, by `stepId`; they return to pending when it is retried or skipped. */
export async function unblockDependents(tx: RunTransaction, stepId: string): Promise<void> {
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
