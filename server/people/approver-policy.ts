import type pg from "pg";
import { z } from "zod";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { RISK_LEVELS, type RiskLevel } from "../vocabulary";

/**
 * A workspace's approver policy: how many distinct people must approve a gated step, by the risk
 * `assessStep` computes for it (what will run, not what the author says), and whether the author
 * of the plan version may be one of them. Enforced by the engine — when an approval is recorded
 * (`decideApproval`) and again when the step is claimed (`holdStepsWithoutMatchingApproval`) —
 * so no door, link or client can release a step with fewer.
 *
 * Without a policy a step needs one approval and its author may give it: what a single person
 * running Stepwise for themselves needs, and the behaviour before policies.
 */
const count = z.number().int().min(1, "At least one approval").max(5, "At most five approvals");
export const approverPolicySchema = z.object({
  approvals: z.object({ low: count, medium: count, high: count }),
  /** False: the author of the plan version (a person or an agent, by name) may not approve its steps. */
  authorMayApprove: z.boolean(),
});
export type ApproverPolicy = z.output<typeof approverPolicySchema>;

export const DEFAULT_APPROVER_POLICY: ApproverPolicy = {
  approvals: { low: 1, medium: 1, high: 1 },
  authorMayApprove: true,
};

/** A stored policy (workspaces.approval_policy); null, or anything unreadable, is the default. */
export function readPolicy(stored: unknown): ApproverPolicy {
  const parsed = approverPolicySchema.safeParse(stored);
  return parsed.success ? parsed.data : DEFAULT_APPROVER_POLICY;
}

export function isDefaultPolicy(policy: ApproverPolicy): boolean {
  return policy.authorMayApprove && RISK_LEVELS.every((risk) => policy.approvals[risk] === 1);
}

/** "2 approvals for high risk": how the audit and the approval surfaces name the rule applied. */
export function describeRequirement(policy: ApproverPolicy, risk: RiskLevel): string {
  const required = policy.approvals[risk];
  const author = policy.authorMayApprove ? "" : ", not the author";
  return `${required} approval${required === 1 ? "" : "s"} for ${risk} risk${author}`;
}

/** The policy of the workspace a run acts in (runs from before workspaces get the default). */
export async function policyForRun(db: Pick<pg.ClientBase, "query">, runId: string): Promise<ApproverPolicy> {
  const row = await db.query<{ approval_policy: unknown }>(
    "select w.approval_policy from runs r left join workspaces w on w.id = r.workspace_id where r.id = $1",
    [runId],
  );
  return readPolicy(row.rows[0]?.approval_policy ?? null);
}

export async function workspacePolicy(db: Pick<pg.ClientBase, "query">, workspaceId: string): Promise<ApproverPolicy> {
  const row = await db.query<{ approval_policy: unknown }>(
    "select approval_policy from workspaces where id = $1 and removed_at is null",
    [workspaceId],
  );
  if (row.rowCount === 0) throw new AppError("not_found", `No workspace ${workspaceId}`);
  return readPolicy(row.rows[0]!.approval_policy);
}

/** Applies to steps decided from now on, in runs of this workspace under way or to come. */
export async function setWorkspacePolicy(
  pool: pg.Pool,
  workspaceId: string,
  policy: ApproverPolicy,
  actor: string,
): Promise<{ name: string; before: ApproverPolicy }> {
  return inTransaction(pool, async (client) => {
    const before = await workspacePolicy(client, workspaceId);
    const row = await client.query<{ name: string }>(
      "update workspaces set approval_policy = $2::jsonb where id = $1 returning name",
      [workspaceId, JSON.stringify(policy)],
    );
    const name = row.rows[0]!.name;
    // A workspace's settings are about no plan: the entry carries `workspace:<id>` in its place.
    await recordAudit(client, {
      actor,
      action: "workspace.approver_policy_set",
      planId: `workspace:${workspaceId}`,
      detail: { workspace: name, before, after: policy },
    });
    return { name, before };
  });
}
