import { stepDefinitionHash, waiverDefinitionHash } from "../plans/definition-hash";
import type { Step } from "../plans/schema";
import type { ToolRegistry } from "../tools/registry";
import { requiresApprovalByDefault } from "../tools/types";
import { isDefaultPolicy, policyForRun } from "../people/approver-policy";
import { dispatch, requestApproval } from "./advance";
import { approvalsSuffice, describeApprovals } from "./approval-view";
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
 * person waived the gate (or the author claims so). It runs ungated only under a matching waiver.
 */
export function hasWaivedGate(tools: ToolRegistry, step: Step & GraphStep): boolean {
  if (step.gated) return false;
  const tool = tools.get(step.tool);
  return tool !== undefined && requiresApprovalByDefault(tool, step.args);
}

/**
 * The gate check of a claim: of `steps` (about to move ready → running), those that need a
 * person's decision and have none for exactly their current definition are put back into
 * `awaiting_approval` — with the reason, and a fresh expiry — and their ids returned: they must not
 * run. Their queue slot is given back.
 */
export async function holdStepsWithoutMatchingApproval(
  tools: ToolRegistry,
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
  // A waived step gated again is approved like any gated step: an approval of its definition counts too.
  const approvals = await tx.client.query<{ step_id: string; definition_hash: string | null }>(
    `select step_id, definition_hash from approvals
      where run_id = $1 and step_id = any($2) and plan_version = $3 and decision = 'approved'`,
    [tx.run.id, ids, tx.run.plan_version],
  );
  const waivers =
    waived.size === 0
      ? []
      : (
          await tx.client.query<{ step_id: string; definition_hash: string }>(
            "select step_id, definition_hash from gate_waivers where plan_id = $1 and step_id = any($2)",
            [tx.run.plan_id, [...waived]],
          )
        ).rows;
  // The approver policy: distinct approvals of this definition, by the step's computed risk, the
  // author's not counted when the policy says so (one approval by anyone under the default).
  const policy = await policyForRun(tx.client, tx.run.id);
  const strict = !isDefaultPolicy(policy);
  const run = {
    id: tx.run.id,
    planId: tx.run.plan_id,
    planVersion: tx.run.plan_version,
    workspaceRoot: tx.run.workspace_root,
  };
  const views = strict ? await describeApprovals(tx.client, tools, run, ids) : undefined;
  const shortOf = new Map<string, string>();
  for (const step of needing) {
    const hash = runStepDefinitionHash(tx, step);
    const decisions = approvals.rows.filter((row) => row.step_id === step.id);
    const tally = views?.get(step.id)?.approvals;
    if (tally && !approvalsSuffice(tally)) {
      if (decisions.some((row) => row.definition_hash === hash)) {
        shortOf.set(step.id, `It has ${tally.given.length} of ${tally.required} approvals (${tally.policy})`);
      }
    } else if (decisions.some((row) => row.definition_hash === hash)) {
      approved.add(step.id);
      continue;
    }
    if (waived.has(step.id)) {
      const waiverHash = waiverDefinitionHash(step);
      if (waivers.some((row) => row.step_id === step.id && row.definition_hash === waiverHash)) continue;
    }
    const reason =
      shortOf.get(step.id) ??
      (decisions.length > 0
        ? "Its definition changed after it was approved; it needs a new approval"
        : waived.has(step.id)
          ? "No person waived its approval gate for this definition; it needs an approval"
          : (unconfinable.get(step.id) ?? "It has no approval"));
    held.add(step.id);
    requestApproval(tx, step.id, tx.now, reason);
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
