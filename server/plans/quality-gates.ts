import { CREATES, isActionableHint, mentionedPaths, pathsToCreate } from "../hint-text";
import type { ToolRegistry } from "../tools/registry";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { existsInWorkspace } from "../tools/workspace-path";
import type { PlanContent, Step } from "../plan-schema";
import type { PlanIssue } from "../plan-schema";

/**
 * Seed 003's quality gates for every plan and every new version, whichever door it came through
 * (the planner, `submit_plan`, `plan.create`, `plan.edit`, `POST /api/plan`, import, a template,
 * an agent's update): `createPlan` and `savePlanVersion` call `checkPlanQuality` after the
 * structural check (`checkPlanDraft`: schema, tools, arguments, dependencies, cycles, gates only
 * go up), so no door can skip it and the same plan gets the same verdict everywhere. Each issue
 * says what to fix.
 *
 * What is refused: a context hint that is not actionable ("stuff"); a hint or a listed path
 * naming a file the workspace does not have (unless a step of the plan writes it, or a hint of the
 * step says to create it); an agent task (work an agent does from its title and hints alone) without a
 * title or without `relevant_file_paths`. Tool steps may go without title, hints and paths — a
 * manual `echo` plan says what it does through its tool and arguments — and a seed 000 checklist
 * (an agent's todo list: titles only, by the seed's format) is exempt from the agent-task fields.
 * The planner asks its model for more (every step titled, typed and hinted,
 * `server/planner/gates.ts`) because its drafts are meant for review as they are.
 */
export type QualityIssueCode =
  "missing_title" | "vague_hint" | "missing_hint_file" | "missing_file" | "missing_relevant_paths";

export interface QualityIssue extends Omit<PlanIssue, "code"> {
  code: QualityIssueCode;
}

export interface QualityContext {
  tools: ToolRegistry;
  /** The plan's workspace; without one there is nothing to check file names against. */
  workspaceRoot?: string;
  /** A seed 000 checklist: steps are titles only, by the seed's format. */
  checklist?: boolean;
}

/** Files Stepwise itself writes into a workspace (the agent loop's rulebook): named before they exist. */
const STEPWISE_FILES = new Set(["docs/agents.md"]);

export function stepName(step: Pick<Step, "id" | "title" | "description">): string {
  const name = step.title?.trim() || step.description.split("\n")[0]!.trim().slice(0, 80);
  return name ? `Step '${name}' (${step.id})` : `Step ${step.id}`;
}

export async function checkPlanQuality(plan: PlanContent, context: QualityContext): Promise<QualityIssue[]> {
  const issues: QualityIssue[] = [];
  const exists = async (filePath: string) =>
    context.workspaceRoot === undefined ||
    STEPWISE_FILES.has(normalise(filePath)) ||
    written.has(normalise(filePath)) ||
    (await existsInWorkspace(context.workspaceRoot, filePath));
  // A file a step of this plan writes need not exist yet.
  const written = new Set<string>();
  for (const step of plan.steps) {
    const tool = context.tools.get(step.tool);
    const target = (step.args as { path?: unknown }).path;
    if (tool && !tool.readOnly && typeof target === "string") written.add(normalise(target));
  }

  for (const step of plan.steps) {
    const name = stepName(step);
    const agentTask = step.tool === AGENT_TASK_TOOL && !context.checklist;
    if (agentTask && !step.title?.trim()) {
      issues.push({
        code: "missing_title",
        stepId: step.id,
        path: ["title"],
        message: `${name} has no \`title\`: say in a sentence what the task achieves.`,
      });
    }
    for (const [index, hint] of step.contextHints.entries()) {
      if (hint.trim() && !isActionableHint(hint)) {
        issues.push({
          code: "vague_hint",
          stepId: step.id,
          path: ["contextHints", index],
          message: `${name} has a hint that is not actionable: "${hint}". Start it with a verb (Read, Edit, Run…) or point at a file or section.`,
        });
      }
    }
    for (const [index, hint] of step.contextHints.entries()) {
      if (!hint.trim() || CREATES.test(hint)) continue;
      for (const mentioned of mentionedPaths(hint)) {
        if (!(await exists(mentioned))) {
          issues.push({
            code: "missing_hint_file",
            stepId: step.id,
            path: ["contextHints", index],
            message: `${name} has a hint pointing to a non-existent file: \`${mentioned}\`.`,
          });
        }
      }
    }
    const paths = step.relevantFilePaths.filter((filePath) => filePath.trim());
    if (agentTask && paths.length === 0) {
      issues.push({
        code: "missing_relevant_paths",
        stepId: step.id,
        path: ["relevantFilePaths"],
        message: `${name} is missing the \`relevant_file_paths\` field: list the files the task will read or change.`,
      });
    }
    const created = pathsToCreate(step.contextHints);
    for (const [index, filePath] of step.relevantFilePaths.entries()) {
      if (filePath.trim() && !created.has(normalise(filePath)) && !(await exists(filePath))) {
        issues.push({
          code: "missing_file",
          stepId: step.id,
          path: ["relevantFilePaths", index],
          message: `${name} lists a file that does not exist: \`${filePath}\`.`,
        });
      }
    }
  }
  return issues;
}

function normalise(filePath: string): string {
  return filePath.replace(/^\.\//, "").replace(/\/+$/, "");
}
