import { stepDefinitionHash } from "../audit/definition-hash";
import type { Step } from "../plan-schema";
import type { Authority, Resource } from "../policy/authority";
import type { ToolRegistry } from "../tools/registry";
import { dispatch, requestApproval } from "./advance";
import { assessApprovals, runsUngatedByWaiver, SYSTEM_PRINCIPAL, type ApprovalView } from "./approval-view";
import type { RunTransaction } from "./run-transaction";
import type { GraphStep } from "./scheduler";

/**
 * Approvals bind to content. A person's approval records the hash of the step's definition as it
 * was shown to them (`stepDefinitionHash` with the run's workspace); a waiver of a default gate
 * records the hash of what was waived. At the moment a step is claimed the engine hashes the
 * definition it is about to run and lets it start only with a matching decision — whichever
 * door, plan version adoption, retry or recovery led there.
 */

/** The hash a decision on this step of this run must carry. */
export function runStepDefinitionHash(tx: RunTransaction, step: Step): string {
  return stepDefinitionHash(step, tx.run.workspace_root);
}

/**
 * A step whose tool asks for approval by default but whose plan version says none is needed: a
 * person waived the gate (or the author claims so). It runs ungated only under a waiver of this
 * definition by someone the authority policy lets approve it, counted like an approval.
 */
export function hasWaivedGate(tools: ToolRegistry, step: Step & GraphStep): boolean {
  return !step.gated && runsUngatedByWaiver(tools, step);
}

/**
 * The gate check of a claim: of `steps` (about to move ready → running), those that need a
 * person's decision are let run only when the authority policy's `step.run` allows it at this
 * moment — enough distinct decisions of exactly their current definition, each by someone who may
 * approve the step now (role held now, credentials not all revoked, not an author under a policy
 * that excludes every author), a waiver counting as its maker's one decision. The others are put
 * back into `awaiting_approval` — with the reason, and a fresh expiry — and their ids returned:
 * they must not run. Their queue slot is given back.
 */
export async function holdStepsWithoutMatchingApproval(
  tools: ToolRegistry,
  authority: Authority,
  tx: RunTransaction,
  steps: (Step & GraphStep)[],
): Promise<{ held: Set<string>; approved: Set<string> }> {
  const held = new Set<string>();
  // Steps that run because a person approved exactly this definition (not merely ungated).
  const approved = new Set<string>();
  // Decided here, by the process that will run the step: an ungated step that is safe unapproved
  // only when confined (read-only shell, read-only git) is not run by a worker that cannot confine
  // it — whatever the process that saved the plan could do — but needs a person, like a gated one.
  const unconfinable = new Map<string, string>();
  for (const step of steps) {
    if (step.gated) continue;
    const refusal = tools.get(step.tool)?.unapprovedRunRefusal?.(step.args);
    if (refusal) unconfinable.set(step.id, refusal);
  }
  const waived = new Set(
    steps.filter((step) => !unconfinable.has(step.id) && hasWaivedGate(tools, step)).map((step) => step.id),
  );
  const needing = steps.filter((step) => step.gated || waived.has(step.id) || unconfinable.has(step.id));
  if (needing.length === 0) return { held, approved };
  const ids = needing.map((step) => step.id);
  const run = {
    id: tx.run.id,
    planId: tx.run.plan_id,
    planVersion: tx.run.plan_version,
    workspaceRoot: tx.run.workspace_root,
  };
  const assessed = await assessApprovals(tx.client, tools, run, ids, authority);
  // Any approval of the step in this version, to tell "changed since approved" from "never approved".
  const anyApproval = await tx.client.query<{ step_id: string }>(
    `select distinct step_id from approvals
      where run_id = $1 and step_id = any($2) and plan_version = $3 and decision = 'approved'`,
    [tx.run.id, ids, tx.run.plan_version],
  );
  const everApproved = new Set(anyApproval.rows.map((row) => row.step_id));
  for (const step of needing) {
    const facts = assessed.get(step.id);
    const decisions = facts?.resource.decisions ?? [];
    if (facts && authority.authorize(SYSTEM_PRINCIPAL, "step.run", facts.resource).allowed) {
      if (decisions.some((decision) => decision.via === "approval")) approved.add(step.id);
      continue;
    }
    held.add(step.id);
    requestApproval(tx, step.id, tx.now, holdReason(step.id, facts, everApproved, waived, unconfinable));
  }
  if (held.size > 0) {
    // A queued step held a parallelism slot; it gives it back while it waits for a person.
    tx.stepRowsWrittenDirectly();
    const unqueued = await tx.client.query(
      `update run_steps rs set queued = false from run_steps prior
        where rs.run_id = $1 and rs.step_id = any($2) and prior.run_id = rs.run_id
          and prior.step_id = rs.step_id and prior.queued
        returning rs.step_id`,
      [tx.run.id, [...held]],
    );
    tx.run.active_steps -= unqueued.rowCount ?? 0;
    await dispatch(tx);
  }
  return { held, approved };
}

/** Why a step waits, in the words the run page and the audit show. */
function holdReason(
  stepId: string,
  facts: { view: ApprovalView; resource: Resource } | undefined,
  everApproved: ReadonlySet<string>,
  waived: ReadonlySet<string>,
  unconfinable: ReadonlyMap<string, string>,
): string {
  const decisions = facts?.resource.decisions ?? [];
  const tally = facts?.view.approvals;
  if (tally && decisions.length > 0) {
    const counted = new Set(tally.given);
    const discounted = [...new Set(decisions.map((decision) => decision.principal.name))].filter(
      (name) => !counted.has(name),
    );
    const discountedNote =
      discounted.length > 0
        ? `; ${discounted.join(", ")} may not approve it now and ${discounted.length === 1 ? "does" : "do"} not count`
        : "";
    return `It has ${tally.given.length} of ${tally.required} approvals (${tally.policy})${discountedNote}`;
  }
  if (everApproved.has(stepId)) return "Its definition changed after it was approved; it needs a new approval";
  if (waived.has(stepId)) return "No person waived its approval gate for this definition; it needs an approval";
  return unconfinable.get(stepId) ?? "It has no approval";
}

/**
 * A run moved from `oldVersion` to its current plan version: decisions carry over only to steps
 * whose definition in the new version hashes exactly to what was decided — a changed step, or
 * one whose old decision predates hashing, is decided again.
 */
export async function carryDecisionsToCurrentVersion(
  tx: RunTransaction,
  oldVersion: number,
  stepIds: readonly string[],
): Promise<void> {
  const expected = stepIds.flatMap((id) => {
    const step = tx.graph.steps.get(id);
    return step ? [{ step_id: id, definition_hash: runStepDefinitionHash(tx, step) }] : [];
  });
  if (expected.length === 0) return;
  await tx.client.query(
    `insert into approvals (run_id, step_id, plan_version, decision, actor, comment, definition_hash, actor_kind)
     select a.run_id, a.step_id, $3, a.decision, a.actor, a.comment, a.definition_hash, a.actor_kind
       from approvals a join jsonb_to_recordset($4::jsonb) as e(step_id text, definition_hash text)
         on e.step_id = a.step_id and e.definition_hash = a.definition_hash
      where a.run_id = $1 and a.plan_version = $2`,
    [tx.run.id, oldVersion, tx.run.plan_version, JSON.stringify(expected)],
  );
}
