import { createHash } from "node:crypto";
import type pg from "pg";
import { z } from "zod";
import { AppError } from "../errors";
import type { ToolRegistry } from "../tools/registry";
import { approvalViewSchema, assessApprovals } from "./approval-view";
import { inTransaction } from "../db";
import { decideApprovalIn } from "./commands";
import type { EngineDeps } from "./deps";

/**
 * The gate on a fan-out's group. A template whose tool is gated makes instances that each wait for
 * approval of exactly their own definition (element written in). A person decides them together,
 * on the concrete list as shown: the decision carries `listHash` — of every instance's definition
 * hash, in list order — and is refused when the list is not the one they saw. Each instance then
 * gets its own approval of its own hash, which the claim checks as for any gated step.
 */

export const groupViewSchema = z.object({
  templateId: z.string(),
  status: z.string(),
  instances: z.array(
    z.object({
      stepId: z.string(),
      status: z.string(),
      item: z.unknown(),
      approval: approvalViewSchema.nullable(),
    }),
  ),
  listHash: z.string().describe("Decide the group with this: refused if the list is not the one shown"),
});
export type GroupView = z.infer<typeof groupViewSchema>;

export async function fanOutGroupView(
  db: Pick<pg.ClientBase, "query">,
  tools: ToolRegistry,
  runId: string,
  templateId: string,
): Promise<GroupView> {
  const run = await db.query<{ plan_id: string; plan_version: number; workspace_root: string; status: string | null }>(
    `select r.plan_id, r.plan_version, r.workspace_root, t.status
       from runs r left join run_steps t on t.run_id = r.id and t.step_id = $2 where r.id = $1`,
    [runId, templateId],
  );
  const row = run.rows[0];
  if (!row?.status) throw new AppError("not_found", `No step ${templateId} in run ${runId}`);
  const instances = await db.query<{ step_id: string; status: string; item: unknown }>(
    `select step_id, status, item from run_steps where run_id = $1 and template_id = $2`,
    [runId, templateId],
  );
  const ordered = instances.rows.sort((a, b) => indexOf(a.step_id) - indexOf(b.step_id));
  const waiting = ordered.filter((instance) => instance.status === "awaiting_approval").map((i) => i.step_id);
  const assessed = await assessApprovals(
    db,
    tools,
    { id: runId, planId: row.plan_id, planVersion: row.plan_version, workspaceRoot: row.workspace_root },
    waiting,
  );
  const views = ordered.map((instance) => ({
    stepId: instance.step_id,
    status: instance.status,
    item: instance.item,
    approval: assessed.get(instance.step_id)?.view ?? null,
  }));
  return { templateId, status: row.status, instances: views, listHash: listHash(views) };
}

function indexOf(stepId: string): number {
  return Number(/\[(\d+)\]$/.exec(stepId)?.[1] ?? -1);
}

/** The hash of the concrete list as a person sees it: each waiting instance's id and definition hash. */
function listHash(views: { stepId: string; approval: { definitionHash: string } | null }[]): string {
  const lines = views.map((view) => `${view.stepId} ${view.approval?.definitionHash ?? "-"}`);
  return createHash("sha256").update(lines.join("\n")).digest("hex");
}

/**
 * Approves or denies every waiting instance of a group as the person saw it, all or none: in one
 * transaction holding the run's lock — so the list cannot change between the check of its hash
 * and the last decision — each instance's decision binds to its own definition hash and asks the
 * authority policy as any step decision does (decideApprovalIn: `step.approve` on the decider as
 * they stand now); one refused rolls every other back.
 */
export async function decideFanOutGroup(
  deps: EngineDeps,
  input: { runId: string; templateId: string; approve: boolean; actor: string; listHash: string; comment?: string },
): Promise<{ decided: string[] }> {
  return inTransaction(deps.pool, async (client) => {
    const locked = await client.query("select 1 from runs where id = $1 for update", [input.runId]);
    if (locked.rowCount === 0) throw new AppError("not_found", `No run ${input.runId}`);
    const view = await fanOutGroupView(client, deps.tools, input.runId, input.templateId);
    if (view.listHash !== input.listHash) {
      throw new AppError(
        "version_conflict",
        `The list of ${input.templateId} is not the one shown to you; review the instances it will run now and decide again`,
      );
    }
    const decided: string[] = [];
    for (const instance of view.instances) {
      if (!instance.approval) continue;
      await decideApprovalIn(deps, client, {
        runId: input.runId,
        stepId: instance.stepId,
        approve: input.approve,
        actor: input.actor,
        definitionHash: instance.approval.definitionHash,
        ...(input.comment && { comment: input.comment }),
      });
      decided.push(instance.stepId);
    }
    return { decided };
  });
}
