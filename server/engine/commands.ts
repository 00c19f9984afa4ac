import type pg from "pg";
import { actorKindOf } from "../caller-context";
import { mayLiftPause, type IdentityKind } from "../vocabulary";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import type { StepStatus } from "../plan-schema";
import type { StepResult } from "../vocabulary";
import { runStepDefinitionHash } from "./approval-binding";
import { assessApprovals } from "./approval-view";
import { principalNow } from "../policy/facts";
import { updateAgentTasks } from "./agent-tasks";
import { onFailedStep, reopenRun } from "./failed-steps";
import { advance, cancelOpenSteps, dispatch, finishIfDone, makeReady, unblockDependents } from "./advance";
import type { EngineDeps } from "./deps";
import { holdForSignal } from "./outcome";
import { CANCEL_CHANNEL } from "../queue/jobs";
import { audit, openRunTransaction, requireRun, type RunTransaction, type StepWaiting } from "./run-transaction";

interface ApprovalDecision {
  runId: string;
  stepId: string;
  approve: boolean;
  actor: string;
  /** The person's note on the decision, stored with it (approvals.comment) and audited. */
  comment?: string;
  /** How the decision arrived when not directly (`link`: a signed decision link); audited. */
  via?: "link";
  /**
   * The definition hash the person was shown (approval surfaces carry it): an approval of a step
   * that changed since is refused rather than applied to a definition nobody saw.
   */
  definitionHash?: string;
}

/** Approve or deny a gated step. Enforced here, whatever the client: only awaiting steps can be decided. */
export async function decideApproval(deps: EngineDeps, input: ApprovalDecision): Promise<void> {
  await inTransaction(deps.pool, (client) => decideApprovalIn(deps, client, input));
}

/**
 * `decideApproval` inside a transaction the caller holds: a fan-out group's decisions are all
 * made, or none, in the one transaction that checked the list (fan-out-decisions.ts).
 */
export async function decideApprovalIn(
  deps: EngineDeps,
  client: pg.PoolClient,
  input: ApprovalDecision,
): Promise<void> {
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
  // The decision covers exactly the definition the step has now (see approval-binding.ts).
  const step = tx.graph.steps.get(input.stepId);
  if (!step) throw new AppError("not_found", `The run's plan version has no step ${input.stepId}`);
  const definitionHash = runStepDefinitionHash(tx, step);
  // A link is made for one definition: it denies nothing else either.
  const bound = input.approve || input.via === "link";
  if (bound && input.definitionHash !== undefined && input.definitionHash !== definitionHash) {
    throw new AppError(
      "version_conflict",
      `${input.stepId} changed after it was shown to you; review what it will run now and decide again`,
    );
  }
  const tally = input.approve ? await approvalTally(deps, client, tx, input) : undefined;
  await client.query(
    `insert into approvals (run_id, step_id, plan_version, decision, actor, comment, definition_hash, actor_kind)
     values ($1, $2, $3, $4, $5, $6, $7, $8)`,
    [
      input.runId,
      input.stepId,
      tx.run.plan_version,
      input.approve ? "approved" : "denied",
      input.actor,
      input.comment ?? null,
      definitionHash,
      actorKindOf(input.actor),
    ],
  );
  await audit(tx, input.actor, input.approve ? "step.approved" : "step.denied", input.stepId, {
    definitionHash,
    // The person's words with the decision (kept as `comment` on the approvals row).
    ...(input.comment && { note: input.comment }),
    ...(input.via && { via: input.via }),
    // Who approved under which policy; "released" says whether this approval let the step run.
    ...(tally && { ...tally, released: tally.approvals.length >= tally.required }),
  });
  tx.events.push({
    type: "approval.decided",
    stepId: input.stepId,
    data: {
      decision: input.approve ? "approved" : "denied",
      actor: input.actor,
      actorKind: actorKindOf(input.actor),
      comment: input.comment ?? null,
      ...(tally && { approvals: tally.approvals.length, required: tally.required }),
    },
  });
  if (input.approve) {
    // Short of the policy's count the approval stays recorded, bound to the definition, and the
    // step keeps waiting for another approver.
    if (!tally || tally.approvals.length >= tally.required) {
      makeReady(tx, input.stepId);
      await dispatch(tx);
    }
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
}

/**
 * The authority policy (server/policy/authority.ts) on the facts as they stand now: may this
 * person approve this step (role held now, not an author of any version under a policy that
 * excludes authors), and how many distinct approvals the step's computed risk asks for.
 */
async function approvalTally(
  deps: EngineDeps,
  client: pg.PoolClient,
  tx: RunTransaction,
  input: ApprovalDecision,
): Promise<{ policy: string; approvals: string[]; required: number }> {
  const run = {
    id: tx.run.id,
    planId: tx.run.plan_id,
    planVersion: tx.run.plan_version,
    workspaceRoot: tx.run.workspace_root,
  };
  const facts = (await assessApprovals(client, deps.tools, run, [input.stepId], deps.authority)).get(input.stepId);
  const { required, given, policy, author } = facts?.view.approvals ?? {
    required: 1,
    given: [],
    policy: "1 approval",
  };
  const approver = await principalNow(client, input.actor, actorKindOf(input.actor));
  const decision = deps.authority.authorize(approver, "step.approve", facts?.resource);
  if (!decision.allowed) {
    throw new AppError(
      "forbidden",
      decision.rule === "authors-may-not-approve"
        ? `${input.actor} wrote a version of this plan and may not approve its steps (approver policy: ${policy}; authors: ${author}); another approver must`
        : `${input.actor} may not approve ${input.stepId}: ${decision.reason}`,
      { policy, author, rule: decision.rule },
    );
  }
  if (given.includes(input.actor)) {
    throw new AppError(
      "invalid_state",
      `${input.actor} already approved ${input.stepId}; it has ${given.length} of ${required} approvals and waits for another approver`,
      { policy, approvals: given, required },
    );
  }
  return { policy, approvals: [...given, input.actor], required };
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

/** Who steers a run, and as what kind of identity (by default the calling identity's kind). */
interface SteerInput {
  runId: string;
  actor: string;
  actorKind?: IdentityKind;
  /** Why, when it is not simply the actor's wish (a cancel for an abandoned session): the steps say so. */
  reason?: string;
}

/** Cancels a run: running steps are aborted, every other open step becomes cancelled. */
export async function cancelRun(deps: EngineDeps, input: SteerInput): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await openRunTransaction(deps, client, input.runId);
    if (!tx) throw new AppError("not_found", `No run ${input.runId}`);
    if (tx.run.status === "completed" || tx.run.status === "failed" || tx.run.status === "cancelled") {
      throw new AppError("invalid_state", `The run is already ${tx.run.status}`);
    }
    await cancelOpenSteps(tx, input.reason ?? `Cancelled by ${input.actor}`);
    tx.run.status = "cancelled";
    tx.run.active_steps = 0;
    tx.events.push({ type: "run.cancelled", data: { status: "cancelled", actor: input.actor } });
    await audit(tx, input.actor, "run.cancelled", null);
    await tx.flush();
    await client.query("select pg_notify($1, $2)", [CANCEL_CHANNEL, input.runId]);
  });
}

/** Pause: running steps finish, nothing new starts until resumed. Who paused, by kind, is kept. */
export async function pauseRun(deps: EngineDeps, input: SteerInput): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (tx.run.status !== "running")
      throw new AppError("invalid_state", `Only a running run can be paused; it is ${tx.run.status}`);
    await client.query("update runs set paused_by_kind = $2 where id = $1", [
      input.runId,
      input.actorKind ?? actorKindOf(input.actor),
    ]);
    tx.run.status = "paused";
    tx.events.push({ type: "run.paused", data: { status: "paused", actor: input.actor } });
    await audit(tx, input.actor, "run.paused", null);
    await tx.flush();
  });
}

/**
 * Resume a paused run. A person's pause outranks an agent: checked here, in the transaction that
 * holds the run's lock, so no door and no race lets an agent lift it.
 */
export async function resumeRun(deps: EngineDeps, input: SteerInput): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (tx.run.status !== "paused")
      throw new AppError("invalid_state", `Only a paused run can be resumed; it is ${tx.run.status}`);
    const paused = await client.query<{ paused_by_kind: IdentityKind | null }>(
      "select paused_by_kind from runs where id = $1",
      [input.runId],
    );
    const resumer = input.actorKind ?? actorKindOf(input.actor);
    if (!mayLiftPause(paused.rows[0]?.paused_by_kind, resumer)) {
      throw new AppError(
        "forbidden",
        `A person paused this run; only a person may resume it (${input.actor} is an ${resumer}).`,
      );
    }
    await client.query("update runs set paused_by_kind = null where id = $1", [input.runId]);
    tx.run.status = "running";
    tx.events.push({ type: "run.resumed", data: { status: "running", actor: input.actor } });
    await audit(tx, input.actor, "run.resumed", null);
    await dispatch(tx);
    await finishIfDone(tx);
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

/**
 * A failed step is given up: its dependents run unless they need its output. An agent task that
 * waits for its agent (or one the agent started) can be skipped too: a person steering a run whose
 * agent went away must not wait for it for ever. It settles as the agent's CANCELLED would.
 */
export async function skipStep(
  deps: EngineDeps,
  input: { runId: string; stepId: string; actor: string },
): Promise<void> {
  const row = await deps.pool.query<{ status: StepStatus; agent: boolean }>(
    `select status, coalesce(waiting->>'kind' = 'agent', false) as agent
     from run_steps where run_id = $1 and step_id = $2`,
    [input.runId, input.stepId],
  );
  const step = row.rows[0];
  if (step && (step.status === "awaiting_agent" || (step.status === "running" && step.agent))) {
    await updateAgentTasks(deps, {
      runId: input.runId,
      updates: [{ stepId: input.stepId, status: "CANCELLED", note: `skipped by ${input.actor}` }],
      actor: input.actor,
    });
    return;
  }
  return skipFailedStep(deps, input);
}

function skipFailedStep(deps: EngineDeps, input: { runId: string; stepId: string; actor: string }): Promise<void> {
  return onFailedStep(deps, input, "skipped", async (tx) => {
    tx.setStatus(input.stepId, "skipped", `Skipped by ${input.actor} after it failed`);
    await unblockDependents(tx, input.stepId);
    reopenRun(tx, `${input.stepId} skipped by ${input.actor}`);
    await audit(tx, input.actor, "step.skipped", input.stepId);
    await advance(tx, [input.stepId]);
  });
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
    // A person who paused the run since keeps it paused: clearing a signal lifts only the signal's.
    const paused = await client.query<{ paused_by_kind: IdentityKind | null }>(
      "select paused_by_kind from runs where id = $1",
      [input.runId],
    );
    if (!mayLiftPause(paused.rows[0]?.paused_by_kind, "system")) return;
    tx.run.status = "running";
    tx.events.push({ type: "run.resumed", data: { status: "running", actor: input.actor, reason: "Signals cleared" } });
    await dispatch(tx);
    await finishIfDone(tx);
    await tx.flush();
  });
}
