import fs from "node:fs/promises";
import type { PlanContent } from "../plans/schema";
import { checkPlanDraft, type PlanIssue, type PlanIssueCode } from "../plans/validate";
import type { ToolRegistry } from "../tools/registry";
import { resolveInWorkspace } from "../tools/workspace-path";

/** Seed 003's quality gates beyond the plan's structural validation. */
export type GateCode =
  PlanIssueCode | "missing_file" | "missing_context_hints" | "missing_type" | "empty_plan" | "judge";

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

function stepName(step: { id: string; title?: string; description: string }): string {
  const name = step.title || step.description.split("\n")[0]!.slice(0, 80);
  return name ? `Step '${name}' (${step.id})` : `Step ${step.id}`;
}

/**
 * Every quality gate on one draft: schema, acyclic, dependencies exist, tools exist, arguments
 * valid per tool schema, `$step` references point to dependencies (all from `checkPlanDraft`),
 * then destructive steps gated, listed file paths exist in the workspace, context hints present
 * and types set. Returns every failure, so one refinement can fix them all.
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
  // A file a step of this plan creates need not exist yet.
  const written = new Set<string>();
  for (const step of plan.steps) {
    const tool = options.tools.get(step.tool);
    const target = (step.args as { path?: unknown }).path;
    if (tool && !tool.readOnly && typeof target === "string") written.add(normalise(target));
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
    for (const [index, filePath] of step.relevantFilePaths.entries()) {
      if (written.has(normalise(filePath))) continue;
      if (!(await existsInWorkspace(options.workspaceRoot, filePath))) {
        issues.push({
          code: "missing_file",
          stepId: step.id,
          path: ["relevantFilePaths", index],
          message: `${stepName(step)} lists a file that does not exist: \`${filePath}\`.`,
        });
      }
    }
  }
  return issues.length === 0 ? { ok: true, plan, issues: [] } : { ok: false, issues, plan };
}

function normalise(filePath: string): string {
  return filePath.replace(/^\.\//, "").replace(/\/+$/, "");
}

async function existsInWorkspace(root: string, filePath: string): Promise<boolean> {
  try {
    await fs.stat(await resolveInWorkspace(root, filePath));
    return true;
  } catch {
    return false;
  }
}
