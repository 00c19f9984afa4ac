import type { StepStatus } from "../plans/schema";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { APPROVAL_EXPIRY_TASK, APPROVAL_WARNING_TASK } from "./queue";
import type { RunTransaction } from "./run-transaction";
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
  // Steps made ready in this transaction are not in the table yet: written first, or — on the
  // hot path, which writes them with the write-back — read around. A step whose status changed
  // here counts as ready exactly when its new status is.
  if (!tx.deferStepWrites) await tx.flushStatusesOnly();
  const { changed, ready: madeReady } = tx.pendingStatuses();
  const ready = await tx.client.query<{ step_id: string; attempt: number }>(
    `update run_steps set queued = true where run_id = $1 and step_id in (
       select step_id from run_steps where run_id = $1 and not queued
         and (status = 'ready' or step_id = any($4::text[])) and (step_id <> all($3::text[]) or step_id = any($4::text[]))
       order by position limit $2
     ) returning step_id, attempt`,
    [tx.run.id, slots, changed, madeReady],
  );
  for (const row of ready.rows) {
    tx.jobs.push({ runId: tx.run.id, stepId: row.step_id, attempt: row.attempt + 1 });
  }
  tx.run.active_steps += ready.rows.length;
}

export async function finishIfDone(tx: RunTransaction): Promise<void> {
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

export async function cancelOpenSteps(tx: RunTransaction, reason: string): Promise<void> {
  await tx.flushStatusesOnly();
  const open = await tx.client.query<{ step_id: string; status: StepStatus }>(
    `select step_id, status from run_steps where run_id = $1
       and status in ('pending','ready','awaiting_approval','awaiting_input','awaiting_agent','running') order by position`,
    [tx.run.id],
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
