import type { Step } from "../plan-schema";
import type { StepResult } from "../vocabulary";
import { ReferenceError, resolveReferences } from "../plans/references";
import type { StepStatus } from "../plan-schema";
import { askUserInputSchema } from "../tools/ask-user";
import { advance, dispatch } from "./advance";
import { beginChildRunStep } from "./child-run-step";
import { holdStepsWithoutMatchingApproval } from "./approval-binding";
import type { EngineDeps } from "./deps";
import { recordOutcomeIn, type Outcome } from "./outcome";
import type { RunRow, RunTransaction, StepJobRef, StepWaiting } from "./run-transaction";
import type { GraphStep } from "./scheduler";

export interface ClaimedStep {
  step: Step;
  attempt: number;
  args: unknown;
  run: RunRow;
  /** A person approved this step (its gate, or running it without the confinement it relied on). */
  approvedByPerson?: boolean;
}

/**
 * The continuations one transaction claims, when `inTransaction` may try it several times (a lock
 * timeout rolls a try back). Each try claims into a fresh list (`nextTry`), and the continuation
 * slots reserved for a try that rolled back are given back; only the list of the try that
 * committed is started — so a step claimed in a try that rolled back and claimed again in the next
 * starts once. A transaction that fails for good gives its slots back too (`release`).
 */
export class ContinuationClaims {
  private list: ClaimedStep[] = [];

  constructor(private readonly slots: { used: number } | undefined) {}

  /** At the start of each try: whatever an earlier try claimed was rolled back with it. */
  nextTry(): ClaimedStep[] {
    this.release();
    return this.list;
  }

  release(): void {
    if (this.slots) this.slots.used -= this.list.length;
    this.list = [];
  }

  /** The committed try's claims, to start now. */
  get committed(): ClaimedStep[] {
    return this.list;
  }
}

export type OpResult = { ok: true; value: unknown } | { ok: false; error: unknown };

/**
 * Steps that outcomes in this transaction just made ready are claimed by this process directly,
 * as far as it has continuation slots, instead of going through the queue: a chain then costs one
 * transaction per step. The rest are queued as usual. Durability is unchanged: a continuation is a
 * running step of this worker, recovered like any other if the process dies.
 */
export async function claimContinuations(
  deps: EngineDeps,
  tx: RunTransaction,
  rows: Map<string, { status: StepStatus; attempt: number }>,
  /** Slots of continuations whose tools have ended, given up as soon as this transaction commits. */
  handedOver = 0,
): Promise<ClaimedStep[]> {
  const slots = deps.continuationSlots;
  // A stopping worker takes nothing new: what it hands on goes to the queue, for whoever runs next.
  if (!deps.workerId || !slots || deps.stopping) return [];
  const free = slots.limit - slots.used + handedOver;
  if (free <= 0) return [];
  const taken = tx.jobs.filter((job) => !job.runAt && !job.requeued).slice(0, free);
  if (taken.length === 0) return [];
  const takenSet = new Set(taken);
  tx.jobs.splice(0, tx.jobs.length, ...tx.jobs.filter((job) => !takenSet.has(job)));
  for (const job of taken) {
    // dispatch queued them as ready; some were made ready in an earlier transaction.
    rows.set(job.stepId, { status: "ready", attempt: job.attempt - 1 });
    tx.statuses.set(job.stepId, "ready");
  }
  const claimed = await claimStepsIn(deps, tx, taken, rows);
  const local: ClaimedStep[] = [];
  claimed.forEach((result, index) => {
    if (result.ok && result.value) local.push(result.value as ClaimedStep);
    else if (!result.ok) tx.jobs.push(taken[index]!); // refused here: let the queue try it
  });
  slots.used += local.length;
  return local;
}

/**
 * Claims ready steps (ready → running) for this process. A job whose step is no longer ready at
 * the expected attempt (cancelled, already done, duplicate delivery) claims nothing.
 */
export async function claimStepsIn(
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
  // Enforced here, below every door: a step needing a person's decision runs only with one that
  // covers exactly its current definition; otherwise it goes back to awaiting_approval.
  const { held, approved } = await holdStepsWithoutMatchingApproval(
    deps.tools,
    deps.authority,
    tx,
    eligible.map((e) => e.step),
  );
  const toRun: typeof eligible = [];
  for (const entry of eligible) {
    if (held.has(entry.step.id)) {
      rows.get(entry.step.id)!.status = "awaiting_approval";
    } else if (deps.tools.get(entry.step.tool)?.capability === "user.ask") {
      await askUser(deps, tx, entry.step, entry.job.attempt);
    } else if (deps.tools.get(entry.step.tool)?.capability === "plan.run") {
      await beginChildRunStep(deps, tx, entry.step, entry.job.attempt, await resolveStepArgs(tx, entry.step));
    } else {
      toRun.push(entry);
    }
  }
  if (toRun.length === 0) return results;
  // Written with the transaction's other step writes (run-transaction.ts, stepWriteSql), before
  // it commits: the claim is durable exactly when the rest of this transaction is.
  for (const { job, step } of toRun) {
    tx.claim(step.id, {
      attempt: job.attempt,
      worker_id: deps.workerId ?? null,
      marks: deps.tools.get(step.tool)?.marksEffectStart === true,
      lease_ms: deps.leaseMs ?? null,
    });
  }
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
      const value: ClaimedStep = {
        step,
        attempt: job.attempt,
        args: resolved.args,
        run: tx.run,
        approvedByPerson: approved.has(step.id),
      };
      results[index] = { ok: true, value };
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
  // A result recorded in this transaction may not be written yet.
  if (tx.hasPendingWrites(stepIds)) await tx.flushStatusesOnly();
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
 * A ready step this worker cannot run unapproved (it relied on confinement the worker cannot give)
 * waits for a person instead, giving its parallelism slot back; once approved it is queued again
 * and runs — on whichever worker claims it — with the approval on record.
 */
/**
 * An `ask_user` step is answered by a person, not executed: it waits in `awaiting_input` with its
 * question (references resolved) and gives its parallelism slot back while it waits.
 */
export async function askUser(
  deps: EngineDeps,
  tx: RunTransaction,
  step: Step & GraphStep,
  attempt: number,
): Promise<void> {
  const resolved = await resolveStepArgs(tx, step);
  const parsed = resolved.ok ? askUserInputSchema.safeParse(resolved.args) : undefined;
  tx.stepRowsWrittenDirectly();
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
