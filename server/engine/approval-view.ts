import { withInstanceSteps } from "./fan-out-steps";
import type pg from "pg";
import { z } from "zod";
import { stepDefinitionHash, waiverDefinitionHash } from "../audit/definition-hash";
import { findReferences, ReferenceError, resolveReferences } from "../plans/references";
import type { Step } from "../plan-schema";
import type { StepResult } from "../vocabulary";
import { assessStep } from "../tools/assessment";
import type { ToolRegistry } from "../tools/registry";
import { describeRequirement, policyForRun, type ApproverPolicy } from "../people/approver-policy";
import { authority as productionAuthority, type Authority, type Resource } from "../policy/authority";
import { decisionsOnDefinition, planAuthors } from "../policy/facts";
import { requiresApprovalByDefault } from "../tools/types";

/** An ApprovalView, as MCP and HTTP describe it. */
export const approvalViewSchema = z.object({
  tool: z.string(),
  args: z.record(z.string(), z.unknown()).describe("The arguments as the plan writes them, $step references included"),
  resolvedArgs: z.unknown().describe("The arguments that will be used: $step references replaced by recorded outputs"),
  resolveError: z.string().optional(),
  workspace: z.string(),
  timeoutSeconds: z.number(),
  maxAttempts: z.number(),
  assessment: z
    .object({
      risk: z.enum(["low", "medium", "high"]),
      capability: z.string(),
      capabilityLabel: z.string(),
      reason: z.string().optional(),
    })
    .describe("Risk and capability computed from the tool and the command analysis, not from the plan's author"),
  authorSays: z.object({ risk: z.string(), capabilityLabel: z.string() }),
  definitionHash: z.string().describe("Send it with run.decide: the decision is refused if the step changed since"),
  planVersion: z.number(),
  approvals: z
    .object({
      required: z.number(),
      given: z.array(z.string()).describe("Who approved this definition so far, each once"),
      policy: z.string().describe("The workspace's approver policy for this step's risk"),
      author: z
        .string()
        .optional()
        .describe("Everyone who wrote a version of the plan, when the policy says they may not approve"),
    })
    .optional()
    .describe("How many distinct approvals the workspace's approver policy asks for this step, and who gave one"),
});

/**
 * What a person deciding about a gated step is shown, on every approval surface (the run page,
 * the inbox, MCP and HTTP answers): exactly what will run, computed here on the server from the
 * run's plan version and recorded outputs — never the plan author's description of it. The
 * author's `risk` and `capabilityLabel` travel only as `authorSays`.
 */
export type ApprovalView = z.output<typeof approvalViewSchema>;

/** The one place `$step` references are resolved for people to read, as the claim resolves them to run. */
export function resolvedArguments(
  step: Pick<Step, "args">,
  outputs: ReadonlyMap<string, unknown>,
): { ok: true; args: unknown } | { ok: false; error: string; args: unknown } {
  try {
    return { ok: true, args: resolveReferences(step.args, outputs) };
  } catch (error) {
    if (!(error instanceof ReferenceError)) throw error;
    return { ok: false, error: error.message, args: step.args };
  }
}

export function describeApproval(
  tools: ToolRegistry,
  step: Step,
  outputs: ReadonlyMap<string, unknown>,
  run: { workspaceRoot: string; planVersion: number },
): ApprovalView {
  const resolved = resolvedArguments(step, outputs);
  return {
    tool: step.tool,
    args: step.args,
    resolvedArgs: resolved.args,
    ...(!resolved.ok && { resolveError: resolved.error }),
    workspace: run.workspaceRoot,
    timeoutSeconds: step.timeoutSeconds,
    maxAttempts: step.retry?.maxAttempts ?? 1,
    // Judged on what will actually run: an unresolvable argument is judged as unknown.
    assessment: assessStep(tools, step.tool, resolved.ok ? resolved.args : step.args),
    authorSays: { risk: step.risk, capabilityLabel: step.capabilityLabel },
    definitionHash: stepDefinitionHash(step, run.workspaceRoot),
    planVersion: run.planVersion,
  };
}

/** Approval views of a run's steps (those waiting for approval, as a rule), by step id. */
export async function describeApprovals(
  db: Pick<pg.ClientBase, "query">,
  tools: ToolRegistry,
  run: { id: string; planId: string; planVersion: number; workspaceRoot: string },
  stepIds: readonly string[],
): Promise<Map<string, ApprovalView>> {
  const assessed = await assessApprovals(db, tools, run, stepIds);
  return new Map([...assessed].map(([id, { view }]) => [id, view]));
}

/**
 * Each step's approval view together with the facts the authority policy decides on
 * (`server/policy/authority.ts`): the workspace's policy, every author of the plan up to the run's
 * version, the computed risk, and the decisions held for exactly the step's current definition —
 * approvals, and for a step that runs ungated only by a waiver, waivers — each maker as they stand
 * now. `approvals.given` is who of them counts now; the claim asks `step.run` of the same resource.
 */
export async function assessApprovals(
  db: Pick<pg.ClientBase, "query">,
  tools: ToolRegistry,
  run: { id: string; planId: string; planVersion: number; workspaceRoot: string },
  stepIds: readonly string[],
  authority: Authority = productionAuthority,
): Promise<Map<string, { view: ApprovalView; resource: Resource }>> {
  const assessed = new Map<string, { view: ApprovalView; resource: Resource }>();
  if (stepIds.length === 0) return assessed;
  const version = await db.query<{ steps: Step[] }>(
    "select steps from plan_versions where plan_id = $1 and version = $2",
    [run.planId, run.planVersion],
  );
  const planSteps = await withInstanceSteps(db, run.id, version.rows[0]?.steps ?? [], stepIds);
  const ids = new Set(planSteps.map((step) => step.id));
  const wanted = planSteps.filter((step) => stepIds.includes(step.id));
  const referenced = [
    ...new Set(wanted.flatMap((step) => findReferences(step.args, (id) => ids.has(id)).map((ref) => ref.stepId))),
  ];
  const outputs = new Map<string, unknown>();
  if (referenced.length > 0) {
    const rows = await db.query<{ step_id: string; result: StepResult | null }>(
      "select step_id, result from run_steps where run_id = $1 and step_id = any($2)",
      [run.id, referenced],
    );
    for (const row of rows.rows) if (row.result?.ok) outputs.set(row.step_id, row.result.value);
  }
  const policy = await policyForRun(db, run.id);
  // Read only when the author rule can apply: it is the one rule that looks at authors.
  const authors = policy.authorMayApprove ? [] : await planAuthors(db, run.planId, run.planVersion);
  for (const step of wanted) {
    const view = describeApproval(tools, step, outputs, run);
    const waiverHash = runsUngatedByWaiver(tools, step) ? waiverDefinitionHash(step) : undefined;
    const decisions = await decisionsOnDefinition(db, run, step.id, view.definitionHash, waiverHash);
    const resource: Resource = { policy, authors, risk: view.assessment.risk, decisions };
    view.approvals = {
      ...approvalRequirement(policy, view.assessment.risk),
      given: authority.countedApprovers(resource),
      ...(authors.length > 0 && { author: authors.join(", ") }),
    };
    assessed.set(step.id, { view, resource });
  }
  return assessed;
}

/** A step whose tool asks for approval by default and whose version turned the gate off. */
export function runsUngatedByWaiver(tools: ToolRegistry, step: Pick<Step, "tool" | "args" | "approvalRequired">) {
  if (step.approvalRequired) return false;
  const tool = tools.get(step.tool);
  return tool !== undefined && requiresApprovalByDefault(tool, step.args);
}

/**
 * Whether a step of a run holds the approvals its run's policy asks for, of its definition as it
 * would run now (references resolved): for code outside the engine that must not act on less.
 */
export async function stepApprovedUnderPolicy(
  db: Pick<pg.ClientBase, "query">,
  tools: ToolRegistry,
  run: { id: string; planId: string; planVersion: number; workspaceRoot: string },
  stepId: string,
  authority: Authority = productionAuthority,
): Promise<boolean> {
  const assessed = (await assessApprovals(db, tools, run, [stepId], authority)).get(stepId);
  return assessed !== undefined && authority.authorize(SYSTEM_PRINCIPAL, "step.run", assessed.resource).allowed;
}

/** The engine asking whether a step may run: the system, on the facts of the step. */
export const SYSTEM_PRINCIPAL = { kind: "system", name: "system" } as const;

/** What the approver policy asks of a step of this computed risk. */
export function approvalRequirement(
  policy: ApproverPolicy,
  risk: ApprovalView["assessment"]["risk"],
): { required: number; policy: string } {
  return { required: policy.approvals[risk], policy: describeRequirement(policy, risk) };
}

/**
 * One step of a run as a person deciding on it sees it: its status, and — while it waits for
 * approval — what approving would let run. The run page, `run.approval` and decision links ask here.
 */
export async function waitingApproval(
  db: Pick<pg.ClientBase, "query">,
  tools: ToolRegistry,
  runId: string,
  stepId: string,
): Promise<{ status: string; planId: string; planVersion: number; view: ApprovalView | undefined } | undefined> {
  const found = await db.query<{ plan_id: string; plan_version: number; workspace_root: string; status: string }>(
    `select r.plan_id, r.plan_version, r.workspace_root, rs.status
       from runs r join run_steps rs on rs.run_id = r.id where r.id = $1 and rs.step_id = $2`,
    [runId, stepId],
  );
  const row = found.rows[0];
  if (!row) return undefined;
  const base = { status: row.status, planId: row.plan_id, planVersion: row.plan_version };
  if (row.status !== "awaiting_approval") return { ...base, view: undefined };
  const run = { id: runId, planId: row.plan_id, planVersion: row.plan_version, workspaceRoot: row.workspace_root };
  const views = await describeApprovals(db, tools, run, [stepId]);
  return { ...base, view: views.get(stepId) };
}
