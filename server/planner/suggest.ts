import { generateText, Output } from "ai";
import type { StepInput } from "../plan-schema";
import { getPlan } from "../plans/service";
import type { PlanIssue } from "../plan-schema";
import { checkPlanDraft } from "../plans/validate";
import { revisePlan } from "../plans/versions";
import { requirePlanningModel } from "./config";
import type { PlannerDeps } from "./deps";
import { suggestionsSchema } from "./llm-schemas";
import { callModel } from "./model-call";
import { PROVIDER_OPTIONS } from "./planning";
import { suggestPrompt } from "./prompts";
import { findTodoMarkers, snapshotWorkspace, type WorkspaceSnapshot } from "./snapshot";

export interface Suggestion {
  reason: string;
  step: StepInput;
  /** Problems the step would bring into the plan; a suggestion with problems cannot be added as is. */
  issues: PlanIssue[];
}

/** Obvious gaps a reviewer would point out, found without a model. */
export function findGaps(snapshot: Pick<WorkspaceSnapshot, "entries" | "keyFiles">): string[] {
  const gaps: string[] = [];
  const files = snapshot.entries;
  if (!files.some((entry) => /^readme(\.\w+)?$/i.test(entry))) gaps.push("The workspace has no README.");
  if (!files.some((entry) => /(^|\/)(tests?|__tests__|spec)(\/|$)|\.(test|spec)\.\w+$/i.test(entry))) {
    gaps.push("The workspace has no tests.");
  }
  const packageJson = snapshot.keyFiles.find((file) => file.path === "package.json");
  if (packageJson && !/"test"\s*:/.test(packageJson.content)) gaps.push("package.json has no test script.");
  return gaps;
}

async function planWorkspace(deps: PlannerDeps, taskId: string): Promise<string> {
  const task = await deps.prisma.task.findUnique({ where: { id: taskId }, include: { workspace: true } });
  return task?.workspace?.path ?? deps.workspaceRoot;
}

/**
 * Seed 003's `suggest`: new steps for a plan from the workspace's TODO/FIXME markers and obvious
 * gaps. Nothing is stored; the person adds the ones they want (`addSuggestedStep`).
 */
export async function suggestSteps(
  deps: PlannerDeps,
  input: { planId: string; version?: number; model?: string },
): Promise<{ suggestions: Suggestion[]; todos: number; gaps: string[] }> {
  const modelId = requirePlanningModel(deps.config, input.model);
  const plan = await getPlan(deps.prisma, input.planId, input.version);
  const root = await planWorkspace(deps, plan.taskId);
  const [snapshot, todos] = await Promise.all([snapshotWorkspace(root), findTodoMarkers(root)]);
  const gaps = findGaps(snapshot);
  const result = await callModel(
    deps,
    { scope: { traceId: plan.traceId, planId: plan.id }, purpose: "suggest", modelId },
    (model, abortSignal) =>
      generateText({
        model,
        prompt: suggestPrompt({
          goal: plan.goal,
          snapshot: snapshot.text,
          todos,
          gaps,
          existingSteps: plan.steps,
          tools: deps.tools.list(),
        }),
        output: Output.object({ schema: suggestionsSchema, name: "suggestions" }),
        abortSignal,
        maxRetries: deps.config.maxRetries,
        providerOptions: PROVIDER_OPTIONS,
      }),
  );
  const existing = new Set(plan.steps.map((step) => step.id));
  const suggestions = result.output.suggestions.map(({ reason, step }) => {
    const candidate = { ...step, id: existing.has(step.id) ? `${step.id}_suggested` : step.id };
    const check = checkPlanDraft({ goal: plan.goal, steps: [...plan.steps, candidate] }, deps.tools);
    return {
      reason,
      step: candidate as StepInput,
      issues: check.issues.filter((issue) => issue.stepId === candidate.id),
    };
  });
  return { suggestions, todos: todos.length, gaps };
}

/** Adds one suggested step to the plan as a new version (a fresh step id, validated like any edit). */
export async function addSuggestedStep(
  deps: PlannerDeps,
  input: { planId: string; baseVersion: number; step: StepInput; actor: string },
) {
  const { plan } = await revisePlan(deps.prisma, deps.tools, {
    planId: input.planId,
    baseVersion: input.baseVersion,
    revise: (base) => ({
      ...base,
      steps: [...base.steps, { ...input.step, dependsOn: input.step.dependsOn ?? [], args: input.step.args ?? {} }],
    }),
    source: "llm",
    author: input.actor,
    workspaceRoot: deps.workspaceRoot,
    changeNote: `Added suggested step: ${(input.step.title ?? input.step.description ?? "").slice(0, 120)}`,
  });
  return plan;
}
