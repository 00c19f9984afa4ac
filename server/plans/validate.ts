import { findUnsafeInput } from "../safe-input";
import type { z } from "zod";
import type { ToolRegistry } from "../tools/registry";
import { requiresApprovalByDefault, type AnyTool } from "../tools/types";
import { branchingIssues } from "./branching-check";
import { referenceTypeIssue } from "./reference-check";
import { findReferences, looksLikeStepId } from "./references";
import {
  planDraftSchema,
  type ParsedPlanDraft,
  type PlanContent,
  type PlanIssue,
  type RetryPolicy,
  type Step,
} from "../plan-schema";

type StepShape = Pick<Step, "id" | "tool" | "args" | "dependsOn" | "when" | "forEach">;

/**
 * Checks a plan's graph and arguments and reports every problem, not only the first. Pure: the
 * registry is the only outside knowledge it needs.
 */
export function validatePlan(plan: { steps: StepShape[] }, registry: ToolRegistry): PlanIssue[] {
  const issues: PlanIssue[] = [];
  const byId = new Map<string, StepShape>();
  for (const step of plan.steps) {
    if (byId.has(step.id)) {
      issues.push({ code: "duplicate_step_id", stepId: step.id, message: `Step id ${step.id} is used more than once` });
    } else {
      byId.set(step.id, step);
    }
  }

  for (const step of plan.steps) {
    for (const dep of step.dependsOn) {
      if (dep === step.id) {
        issues.push({
          code: "self_dependency",
          stepId: step.id,
          message: `${step.id} depends on itself`,
          path: ["dependsOn"],
        });
      } else if (!byId.has(dep)) {
        issues.push({
          code: "unknown_dependency",
          stepId: step.id,
          message: `${step.id} depends on unknown step ${dep}`,
          path: ["dependsOn"],
        });
      }
    }
    const tool = registry.get(step.tool);
    const missing = tool ? undefined : registry.missingReason?.(step.tool);
    if (missing) {
      issues.push({ code: "unknown_tool", stepId: step.id, message: `${step.id}: ${missing}`, path: ["tool"] });
    } else if (!tool) {
      // Say what would work: the available tools, so the fix is one look away.
      const available = registry
        .list()
        .map((candidate) => candidate.name)
        .join(", ");
      issues.push({
        code: "unknown_tool",
        stepId: step.id,
        message: `Unknown tool: ${step.tool}. Available tools: ${available}`,
        path: ["tool"],
      });
    } else {
      const unavailable = tool.unavailableReason?.();
      if (unavailable) {
        issues.push({
          code: "tool_unavailable",
          stepId: step.id,
          message: `${step.id}: ${step.tool} cannot run: ${unavailable}`,
          path: ["tool"],
        });
      }
      issues.push(...argumentIssues(step, tool.inputSchema, byId));
    }
  }

  for (const cycle of findCycles(plan.steps, byId)) {
    issues.push({
      code: "cycle",
      stepId: cycle[0],
      steps: cycle,
      message: `Circular dependency: ${[...cycle, cycle[0]].join(" → ")}`,
    });
  }

  issues.push(...referenceIssues(plan.steps, byId, registry));
  issues.push(...branchingIssues(plan.steps, byId, registry));
  return issues;
}

/** Argument problems, ignoring values that are `$step` references: their type is known only at run time. */
function argumentIssues(step: StepShape, schema: z.ZodType, byId: Map<string, StepShape>): PlanIssue[] {
  const parsed = schema.safeParse(step.args);
  if (parsed.success) return [];
  // In a fan-out step `$item` is the element, known only at run time, like a `$step` reference.
  const isReference = (id: string) => byId.has(id) || looksLikeStepId(id) || (id === "item" && !!step.forEach);
  const referencePaths = findReferences(step.args, isReference).map((ref) => ref.argPath.join("\u0000"));
  return parsed.error.issues
    .filter((issue) => {
      const key = issue.path.join("\u0000");
      return !referencePaths.some((refPath) => key === refPath || key.startsWith(refPath + "\u0000"));
    })
    .map((issue) => ({
      code: "invalid_args" as const,
      stepId: step.id,
      path: ["args", ...issue.path.map((p) => (typeof p === "symbol" ? String(p) : p))],
      message: `${step.id}: ${issue.path.length ? `args.${issue.path.join(".")}` : "args"}: ${issue.message}`,
    }));
}

/**
 * Finds cycles with an iterative depth-first search (recursion would overflow on long chains).
 * Each back edge yields the cycle it closes; steps already on a reported cycle are not reported again.
 */
function findCycles(steps: StepShape[], byId: Map<string, StepShape>): string[][] {
  if (isAcyclic(steps, byId)) return [];
  const WHITE = 0;
  const GREY = 1;
  const BLACK = 2;
  const color = new Map<string, number>();
  const cycles: string[][] = [];
  const reported = new Set<string>();

  for (const root of steps) {
    if ((color.get(root.id) ?? WHITE) !== WHITE) continue;
    const stack: { id: string; next: number }[] = [{ id: root.id, next: 0 }];
    const onPath: string[] = [root.id];
    color.set(root.id, GREY);
    while (stack.length > 0) {
      const frame = stack[stack.length - 1]!;
      const deps = byId.get(frame.id)?.dependsOn ?? [];
      if (frame.next >= deps.length) {
        color.set(frame.id, BLACK);
        stack.pop();
        onPath.pop();
        continue;
      }
      const dep = deps[frame.next++]!;
      if (dep === frame.id || !byId.has(dep)) continue; // reported as self / unknown dependency
      const state = color.get(dep) ?? WHITE;
      if (state === WHITE) {
        color.set(dep, GREY);
        stack.push({ id: dep, next: 0 });
        onPath.push(dep);
      } else if (state === GREY) {
        // onPath runs dependent → dependency; a cycle reads better in execution order.
        const cycle = onPath.slice(onPath.indexOf(dep)).reverse();
        if (!cycle.every((id) => reported.has(id))) {
          cycle.forEach((id) => reported.add(id));
          cycles.push(cycle);
        }
      }
    }
  }
  return cycles;
}

/**
 * Kahn's algorithm over array indices: the common, acyclic case is settled in linear time without
 * the bookkeeping the cycle report needs.
 */
function isAcyclic(steps: StepShape[], byId: Map<string, StepShape>): boolean {
  const index = new Map<string, number>();
  steps.forEach((step, i) => {
    if (!index.has(step.id)) index.set(step.id, i);
  });
  const pending = new Int32Array(steps.length);
  const dependents: number[][] = Array.from({ length: steps.length }, () => []);
  steps.forEach((step, i) => {
    if (index.get(step.id) !== i) return; // a duplicate id: reported elsewhere, not part of the graph
    for (const dep of step.dependsOn) {
      const d = index.get(dep);
      if (d === undefined || d === i || !byId.has(dep)) continue;
      pending[i]!++;
      dependents[d]!.push(i);
    }
  });
  const queue: number[] = [];
  for (let i = 0; i < steps.length; i++) if (pending[i] === 0) queue.push(i);
  for (let head = 0; head < queue.length; head++) {
    for (const next of dependents[queue[head]!]!) if (--pending[next]! === 0) queue.push(next);
  }
  return queue.length === steps.length;
}

/** A reference must point at a (transitive) dependency, otherwise its output may not exist yet. */
function referenceIssues(steps: StepShape[], byId: Map<string, StepShape>, registry: ToolRegistry): PlanIssue[] {
  const issues: PlanIssue[] = [];
  const ancestorCache = new Map<string, Set<string>>();
  const ancestors = (id: string): Set<string> => {
    let found = ancestorCache.get(id);
    if (found) return found;
    found = new Set<string>();
    const stack = [...(byId.get(id)?.dependsOn ?? [])];
    while (stack.length > 0) {
      const next = stack.pop()!;
      if (found.has(next) || !byId.has(next)) continue;
      found.add(next);
      stack.push(...byId.get(next)!.dependsOn);
    }
    ancestorCache.set(id, found);
    return found;
  };

  const isStepId = (id: string) => byId.has(id) || looksLikeStepId(id);
  for (const step of steps) {
    for (const ref of findReferences(step.args, isStepId)) {
      let problem: string | undefined;
      if (!byId.has(ref.stepId)) problem = `refers to unknown step ${ref.stepId}`;
      else if (ref.stepId === step.id) problem = "refers to the step itself";
      else if (!step.dependsOn.includes(ref.stepId) && !ancestors(step.id).has(ref.stepId)) {
        problem = `refers to ${ref.stepId}, which is not one of its dependencies`;
      }
      if (problem === undefined) {
        const typeIssue = referenceTypeIssue(step, ref, byId.get(ref.stepId)!, registry);
        if (typeIssue) issues.push(typeIssue);
        continue;
      }
      const text = `$${[ref.stepId, ...ref.fieldPath].join(".")}`;
      issues.push({
        code: "invalid_reference",
        stepId: step.id,
        path: ["args", ...ref.argPath],
        message: `${step.id}: ${text} ${problem}`,
      });
    }
  }
  return issues;
}

/** Maps zod issues of a whole draft to plan issues that name the step they belong to. */
export function schemaIssues(error: z.ZodError, draft: unknown): PlanIssue[] {
  const rawSteps = (draft as { steps?: unknown } | null)?.steps;
  return error.issues.map((issue) => {
    const [head, index, ...rest] = issue.path;
    if (head === "steps" && typeof index === "number" && Array.isArray(rawSteps)) {
      const rawId = (rawSteps[index] as { id?: unknown } | undefined)?.id;
      const stepId = typeof rawId === "string" ? rawId : `#${index + 1}`;
      return {
        code: "schema" as const,
        stepId,
        path: rest.map((p) => (typeof p === "symbol" ? String(p) : p)),
        message: `${stepId}: ${rest.length ? rest.join(".") : "step"}: ${issue.message}`,
      };
    }
    const where = issue.path.join(".");
    return {
      code: "schema" as const,
      path: issue.path.map((p) => (typeof p === "symbol" ? String(p) : p)),
      message: where ? `${where}: ${issue.message}` : issue.message,
    };
  });
}

/** Fills in what authors may leave out, taking defaults from the tool's metadata. */
export function normalizePlan(draft: ParsedPlanDraft, registry: ToolRegistry): PlanContent {
  const steps: Step[] = draft.steps.map((step, index) => {
    const tool = registry.get(step.tool);
    return {
      id: step.id,
      order: index + 1,
      ...(step.title !== undefined && { title: step.title }),
      description: step.description,
      tool: step.tool,
      args: step.args,
      dependsOn: [...new Set(step.dependsOn)],
      // Gates only go up: an author may add one, never lower the tool's default. A person's waiver
      // in the review page is the one exception (see savePlanVersion).
      approvalRequired: step.approvalRequired === true || (tool ? requiresApprovalByDefault(tool, step.args) : false),
      capability: step.capability ?? tool?.capability ?? "unknown",
      capabilityLabel: step.capabilityLabel ?? tool?.capabilityLabel ?? "Unknown capability",
      labels: step.labels,
      timeoutSeconds: step.timeoutSeconds ?? tool?.defaultTimeoutSeconds ?? 300,
      risk: step.risk ?? defaultRisk(tool, step.args),
      critical: step.critical,
      retry: effectiveRetry(step.retry),
      contextHints: step.contextHints,
      relevantFilePaths: step.relevantFilePaths,
      ...(step.acceptance?.length && { acceptance: step.acceptance }),
      ...(step.type !== undefined && { type: step.type }),
      skipped: step.skipped,
      ...(step.when !== undefined && { when: step.when }),
      ...(step.forEach !== undefined && { forEach: step.forEach }),
      ...(step.maxItems !== undefined && { maxItems: step.maxItems }),
    };
  });
  return {
    goal: draft.goal,
    ...(draft.summary !== undefined && { summary: draft.summary }),
    steps,
    successCriteria: draft.successCriteria,
    questions: draft.questions,
    ...(draft.contextNotes !== undefined && { contextNotes: draft.contextNotes }),
    ...(draft.estimatedDuration !== undefined && { estimatedDuration: draft.estimatedDuration }),
  };
}

function defaultRisk(tool: AnyTool | undefined, args: unknown): Step["risk"] {
  // A tool that waives approval for these arguments (shell running `ls`) judged them read-only.
  if (tool?.requiresApprovalFor && !tool.requiresApprovalFor(args)) return "low";
  return tool?.destructive ? "high" : tool?.readOnly ? "low" : "medium";
}

export type DraftCheck =
  { ok: true; plan: PlanContent; issues: [] } | { ok: false; issues: PlanIssue[]; plan?: PlanContent };

/** Parses an untrusted draft and validates it: the single entry point for every interface. */
export function checkPlanDraft(input: unknown, registry: ToolRegistry): DraftCheck {
  const unsafe = findUnsafeInput(input);
  if (unsafe) return { ok: false, issues: [{ code: "schema", path: unsafe.path.split("."), message: unsafe.message }] };
  const parsed = planDraftSchema.safeParse(input);
  if (!parsed.success) return { ok: false, issues: schemaIssues(parsed.error, input) };
  const plan = normalizePlan(parsed.data, registry);
  const issues = validatePlan(plan, registry);
  return issues.length === 0 ? { ok: true, plan, issues: [] } : { ok: false, issues, plan };
}

/** A step's retry policy with the defaults filled in: what the engine will use. */
export function effectiveRetry(retry: Partial<RetryPolicy> | undefined): RetryPolicy {
  return { maxAttempts: retry?.maxAttempts ?? 3, backoffMs: retry?.backoffMs ?? 500 };
}
