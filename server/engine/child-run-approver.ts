import { workspacePolicy } from "../people/approver-policy";
import { planAuthors, principalNow } from "../policy/facts";
import { actorKindOf } from "../caller-context";
import type { RunPlanArgs } from "../tools/run-plan";
import { assessApprovals, SYSTEM_PRINCIPAL } from "./approval-view";
import type { EngineDeps } from "./deps";

/**
 * Who approves a sub-plan's child run, asked of the authority policy when the child starts — the
 * effect — not only at the claim of its parent step: between the claim and the `start_child_run`
 * job the person whose approval let the step run may have been demoted or had every credential
 * revoked. Two questions, on the facts as they stand now:
 *
 * 1. `step.run` again for the parent step: enough distinct decisions of its exact definition by
 *    people who may approve it now (the claim's question, asked again).
 * 2. `plan.approve` for the person who approves the child (the maker of the latest counted
 *    approval, else of the latest counted waiver) in the run's workspace, on the child plan's
 *    authors when it names a saved plan.
 *
 * A refusal says why, in the words the run page and the audit show; the step then waits for a new
 * decision, as a step whose approver lost the right before its claim does.
 */
export async function childRunApprover(
  deps: EngineDeps,
  parent: { runId: string; stepId: string; planId: string; planVersion: number; workspaceRoot: string },
  fallbackActor: string,
  workspaceId: string | null,
  args: RunPlanArgs,
): Promise<{ ok: true; actor: string } | { ok: false; reason: string }> {
  const run = {
    id: parent.runId,
    planId: parent.planId,
    planVersion: parent.planVersion,
    workspaceRoot: parent.workspaceRoot,
  };
  const facts = (await assessApprovals(deps.pool, deps.tools, run, [parent.stepId], deps.authority)).get(parent.stepId);
  const decisions = facts?.resource.decisions ?? [];
  // A `run_plan` step always needs decisions (its tool is gated; ungated only by a waiver).
  if (!facts || !deps.authority.authorize(SYSTEM_PRINCIPAL, "step.run", facts.resource).allowed) {
    const tally = facts?.view.approvals;
    const counted = new Set(tally?.given ?? []);
    const lost = [...new Set(decisions.map((decision) => decision.principal.name))].filter(
      (name) => !counted.has(name),
    );
    return {
      ok: false,
      reason:
        `Its sub-plan did not start: it has ${counted.size} of ${tally?.required ?? 1} approvals now` +
        (lost.length > 0
          ? `; ${lost.join(", ")} may not approve it now and ${lost.length === 1 ? "does" : "do"} not count`
          : "") +
        "; it needs a new decision",
    };
  }
  const counted = deps.authority.countedApprovers(facts?.resource ?? {});
  const approvals = decisions.filter((d) => d.via === "approval" && counted.includes(d.principal.name));
  const actor = approvals.at(-1)?.principal.name ?? counted.at(-1) ?? fallbackActor;
  const principal = await principalNow(deps.pool, actor, actorKindOf(actor));
  const policy = workspaceId ? await workspacePolicy(deps.pool, workspaceId) : undefined;
  const authors =
    "plan_id" in args && policy && !policy.authorMayApprove
      ? await planAuthors(deps.pool, args.plan_id, args.version)
      : [];
  const decision = deps.authority.authorize(principal, "plan.approve", { ...(policy && { policy }), authors });
  if (!decision.allowed) {
    return {
      ok: false,
      reason: `Its sub-plan did not start: ${actor}, who would approve it, may not approve it now (${decision.reason}); it needs a new decision`,
    };
  }
  return { ok: true, actor };
}
