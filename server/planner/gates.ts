import { checkPlanQuality, stepName, type QualityIssueCode } from "../plans/quality-gates";
import type { PlanContent } from "../plan-schema";
import type { PlanIssue, PlanIssueCode } from "../plan-schema";
import { checkPlanDraft } from "../plans/validate";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import type { ToolRegistry } from "../tools/registry";

/** Seed 003's quality gates beyond the plan's structural validation. */
export type GateCode =
  PlanIssueCode | QualityIssueCode | "missing_context_hints" | "missing_type" | "empty_plan" | "judge";

export interface GateIssue extends Omit<PlanIssue, "code"> {
  code: GateCode;
}

export type GateResult =
  { ok: true; plan: PlanContent; issues: [] } | { ok: false; issues: GateIssue[]; plan?: PlanContent };

/** Seed 003 `plan_validation_failed`, exactly, plus the structured issues for the UI. */
export interface PlanValidationFailed {
  status: "error";
  error_type: "plan_validation_failed";
  message: string;
  details: string[];
  issues: GateIssue[];
}

export function planValidationFailed(issues: GateIssue[]): PlanValidationFailed {
  return {
    status: "error",
    error_type: "plan_validation_failed",
    message: "The submitted plan is invalid and was rejected. You must fix the plan and resubmit.",
    details: issues.map((issue) => issue.message),
    issues,
  };
}

/**
 * Every quality gate on one draft: schema, acyclic, dependencies exist, tools exist, arguments
 * valid per tool schema, `$step` references point to dependencies (all from `checkPlanDraft`),
 * destructive steps gated, then the gates every door runs (`checkPlanQuality`: actionable hints,
 * files that exist, agent tasks' paths) and what the planner asks of its model beyond them: every
 * step titled, hinted and typed. Returns every failure, so one refinement can fix them all.
 */
export async function runQualityGates(
  draft: unknown,
  options: { tools: ToolRegistry; workspaceRoot: string },
): Promise<GateResult> {
  const checked = checkPlanDraft(draft, options.tools);
  if (!checked.plan) return { ok: false, issues: checked.issues };
  const plan = checked.plan;
  const issues: GateIssue[] = [...checked.issues];
  if (plan.steps.length === 0) {
    issues.push({ code: "empty_plan", message: "The plan has no steps." });
  }
  for (const step of plan.steps) {
    if (step.contextHints.filter((hint) => hint.trim()).length === 0) {
      issues.push({
        code: "missing_context_hints",
        stepId: step.id,
        path: ["contextHints"],
        message: `${stepName(step)} is missing the \`context_hints\` field.`,
      });
    }
    if (!step.type) {
      issues.push({
        code: "missing_type",
        stepId: step.id,
        path: ["type"],
        message: `${stepName(step)} has no \`type\` (feature, bugfix, chore, test, docs, refactor, research, ops).`,
      });
    }
    // An agent task's missing title is `checkPlanQuality`'s to report.
    if (!step.title?.trim() && step.tool !== AGENT_TASK_TOOL) {
      issues.push({
        code: "missing_title",
        stepId: step.id,
        path: ["title"],
        message: `${stepName(step)} has no \`title\`: say in a sentence what the step achieves.`,
      });
    }
  }
  // The gates every plan passes on every door (hints actionable, files exist, agent tasks' paths).
  issues.push(...(await checkPlanQuality(plan, { tools: options.tools, workspaceRoot: options.workspaceRoot })));
  return issues.length === 0 ? { ok: true, plan, issues: [] } : { ok: false, issues, plan };
}
