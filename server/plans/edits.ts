import { z } from "zod";
import { AppError, isAppError } from "../errors";
import type { PrismaClient } from "../generated/prisma/client";
import type { ToolRegistry } from "../tools/registry";
import { sameValue } from "./diff";
import { parsePlanJson } from "./import";
import { checkMove } from "./reorder";
import {
  retryPolicySchema,
  riskSchema,
  stepTypeSchema,
  type Plan,
  type PlanContent,
  type RetryPolicy,
  type Step,
  type StepInput,
} from "./schema";
import { getPlan } from "./service";
import type { Authority, Principal } from "../policy/authority";
import { effectiveRetry, type PlanIssue } from "./validate";
import { revisePlan, savePlanVersion } from "./versions";

/**
 * The edits a reviewer makes on the plan page. Each is a pure function from the base version's
 * content to a complete new draft; `editPlan` stores that draft through `savePlanVersion`, which
 * validates it and refuses it when the base version is no longer current.
 */

const stepId = z.string().min(1).max(64);
const text = z.string().max(10_000);
const lines = z.array(z.string().max(2_000)).max(200);

export const stepChangesSchema = z
  .object({
    /** `null` removes the title (the description is shown instead). */
    title: z.string().max(200).nullable(),
    description: text,
    tool: z.string().min(1).max(100),
    args: z.record(z.string(), z.unknown()),
    dependsOn: z.array(stepId).max(1_000),
    approvalRequired: z.boolean(),
    critical: z.boolean(),
    timeoutSeconds: z.number().int().min(1).max(86_400),
    retry: retryPolicySchema,
    risk: riskSchema,
    type: stepTypeSchema.nullable(),
    skipped: z.boolean(),
    labels: lines,
    contextHints: lines,
    relevantFilePaths: lines,
  })
  .partial()
  .strict();
export type StepChanges = z.infer<typeof stepChangesSchema>;

export const planChangesSchema = z
  .object({
    goal: z.string().trim().min(1, "A plan needs a goal").max(10_000),
    summary: text.nullable(),
    successCriteria: lines,
    questions: lines,
    contextNotes: text.nullable(),
    estimatedDuration: z.number().int().min(0).nullable(),
  })
  .partial()
  .strict();

export const newStepSchema = stepChangesSchema.extend({
  tool: z.string().min(1).max(100),
  description: text.default(""),
  args: z.record(z.string(), z.unknown()).default({}),
  dependsOn: z.array(stepId).max(1_000).default([]),
});

export const planEditSchema = z.discriminatedUnion("kind", [
  z.object({ kind: z.literal("updatePlan"), changes: planChangesSchema }),
  z.object({ kind: z.literal("updateStep"), stepId, changes: stepChangesSchema }),
  /** `position` is the new step's 0-based index in the list. */
  z.object({ kind: z.literal("addStep"), position: z.number().int().min(0), step: newStepSchema }),
  /** `removeLinks` confirms removing the deleted step from its dependents' dependencies. */
  z.object({ kind: z.literal("deleteStep"), stepId, removeLinks: z.boolean().default(false) }),
  z.object({ kind: z.literal("moveStep"), stepId, toIndex: z.number().int().min(0) }),
  /** Restores the content of the version before the base version, as a new version. */
  z.object({ kind: z.literal("undo") }),
  /** Replaces the content by an imported plan (JSON as exported, or any plan draft). */
  z.object({ kind: z.literal("import"), planJson: z.string().max(2_000_000) }),
]);
export type PlanEdit = z.input<typeof planEditSchema>;
type ParsedPlanEdit = z.output<typeof planEditSchema>;
type ContentEdit = Exclude<ParsedPlanEdit, { kind: "undo" } | { kind: "import" }>;

/** A plan draft in the shape `checkPlanDraft` accepts; steps may leave tool defaults unset. */
export interface PlanDraftContent extends Omit<PlanContent, "steps"> {
  steps: StepInput[];
}

export interface EditResult {
  draft: PlanDraftContent;
  changeNote: string;
}

/** Computes the new content for an edit of `content`. Throws AppError when the edit is refused. */
export function applyPlanEdit(content: PlanContent, edit: ContentEdit, lastStepNumber: number): EditResult {
  switch (edit.kind) {
    case "updatePlan":
      return updatePlan(content, edit.changes);
    case "updateStep":
      return updateStep(content, edit.stepId, edit.changes);
    case "addStep":
      return addStep(content, edit.position, edit.step, `step_${lastStepNumber + 1}`);
    case "deleteStep":
      return deleteStep(content, edit.stepId, edit.removeLinks);
    case "moveStep":
      return moveStep(content, edit.stepId, edit.toIndex);
  }
}

function updatePlan(content: PlanContent, changes: z.infer<typeof planChangesSchema>): EditResult {
  const draft: PlanDraftContent = { ...content };
  for (const [key, value] of Object.entries(changes)) {
    if (value === null) delete (draft as unknown as Record<string, unknown>)[key];
    else (draft as unknown as Record<string, unknown>)[key] = value;
  }
  return { draft, changeNote: `Edited the plan's ${listFields(Object.keys(changes))}` };
}

/** Defaults that come from the tool; a new tool brings its own unless the edit sets them. */
const TOOL_DEFAULTS = ["capability", "capabilityLabel", "approvalRequired", "risk", "timeoutSeconds"] as const;

function updateStep(content: PlanContent, id: string, changes: StepChanges): EditResult {
  const index = indexOfStep(content, id);
  const old = content.steps[index]!;
  const step: Record<string, unknown> = { ...old };
  if (changes.tool !== undefined && changes.tool !== old.tool) {
    for (const key of TOOL_DEFAULTS) delete step[key];
  }
  for (const [key, value] of Object.entries(changes)) {
    if (value === null) delete step[key];
    else step[key] = value;
  }
  if (changes.dependsOn) {
    step.dependsOn = [...new Set(changes.dependsOn)];
    refuseCycle(content, id, step.dependsOn as string[]);
  }
  const steps: StepInput[] = content.steps.map((s, i) => (i === index ? (step as StepInput) : s));
  // Forms send every field; the history names only those that differ.
  const changed = Object.keys(changes).filter(
    (key) => !sameValue(comparable(key, (old as unknown as Record<string, unknown>)[key]), comparable(key, step[key])),
  );
  if (changed.length === 0) throw new AppError("invalid_input", `Nothing to save: ${id} is unchanged`);
  const changeNote =
    changed.length === 1 && changed[0] === "skipped"
      ? `${changes.skipped ? "Skipped" : "Unskipped"} ${id}`
      : `Edited ${id}: ${listFields(changed)}`;
  return { draft: { ...content, steps: changes.dependsOn ? dependenciesFirst(steps) : steps }, changeNote };
}

function addStep(content: PlanContent, position: number, input: z.infer<typeof newStepSchema>, id: string): EditResult {
  if (position > content.steps.length) {
    throw new AppError(
      "invalid_input",
      `Position ${position + 1} is past the end of the plan (${content.steps.length} steps)`,
    );
  }
  const step: Record<string, unknown> = { id };
  for (const [key, value] of Object.entries(input)) if (value !== null) step[key] = value;
  step.dependsOn = [...new Set(input.dependsOn)];
  const steps: StepInput[] = [...content.steps];
  steps.splice(position, 0, step as StepInput);
  return {
    draft: { ...content, steps: dependenciesFirst(steps) },
    changeNote: `Added ${id} (${input.tool}) at position ${position + 1}`,
  };
}

function deleteStep(content: PlanContent, id: string, removeLinks: boolean): EditResult {
  indexOfStep(content, id);
  const dependents = content.steps.filter((step) => step.dependsOn.includes(id)).map((step) => step.id);
  if (dependents.length > 0 && !removeLinks) {
    throw new AppError(
      "invalid_state",
      `${id} cannot be deleted: ${listIds(dependents)} ${dependents.length === 1 ? "depends" : "depend"} on it. ` +
        `Confirm to remove ${dependents.length === 1 ? "that link" : "those links"} as well.`,
      { dependents },
    );
  }
  const steps = content.steps
    .filter((step) => step.id !== id)
    .map((step) =>
      step.dependsOn.includes(id) ? { ...step, dependsOn: step.dependsOn.filter((dep) => dep !== id) } : step,
    );
  return {
    draft: { ...content, steps },
    changeNote: dependents.length ? `Deleted ${id} and its links from ${listIds(dependents)}` : `Deleted ${id}`,
  };
}

function moveStep(content: PlanContent, id: string, toIndex: number): EditResult {
  const from = indexOfStep(content, id);
  if (toIndex >= content.steps.length) {
    throw new AppError(
      "invalid_input",
      `Position ${toIndex + 1} is past the end of the plan (${content.steps.length} steps)`,
    );
  }
  const check = checkMove(content.steps, id, toIndex);
  if (!check.ok) {
    throw new AppError("invalid_input", check.reason, { blockedBy: check.blockedBy, relation: check.relation });
  }
  const byId = new Map(content.steps.map((step) => [step.id, step]));
  return {
    draft: { ...content, steps: check.order.map((stepId) => byId.get(stepId)!) },
    changeNote: `Moved ${id} from position ${from + 1} to ${toIndex + 1}`,
  };
}

function indexOfStep(content: PlanContent, id: string): number {
  const index = content.steps.findIndex((step) => step.id === id);
  if (index < 0) throw new AppError("not_found", `This version of the plan has no step ${id}`);
  return index;
}

/**
 * Refuses dependencies that would close a cycle, naming it in execution order — the reviewer sees
 * which existing links make the choice impossible.
 */
function refuseCycle(content: PlanContent, id: string, dependsOn: string[]): void {
  const byId = new Map(content.steps.map((step) => [step.id, step]));
  for (const dep of dependsOn) {
    if (dep === id) {
      throw new AppError("invalid_plan", `${id} cannot depend on itself`, [
        { code: "self_dependency", stepId: id, message: `${id} depends on itself`, path: ["dependsOn"] },
      ] satisfies PlanIssue[]);
    }
    // Breadth-first from the new dependency towards `id` along existing links: a path means a cycle.
    const cameFrom = new Map<string, string>([[dep, ""]]);
    const queue = [dep];
    while (queue.length > 0) {
      const current = queue.shift()!;
      if (current === id) {
        const path: string[] = []; // dep → … → id along "depends on" links
        for (let at = id; at !== ""; at = cameFrom.get(at)!) path.unshift(at);
        const cycle = [...path].reverse(); // execution order: id runs first, dep last
        const message = `Circular dependency: ${[...cycle, id].join(" → ")}`;
        throw new AppError(
          "invalid_plan",
          `${id} cannot depend on ${dep}: ${dep} already depends on ${id}` +
            (path.length > 2 ? ` through ${listIds(path.slice(1, -1))}` : "") +
            `. ${message}`,
          [{ code: "cycle", stepId: id, steps: cycle, message, path: ["dependsOn"] }] satisfies PlanIssue[],
        );
      }
      for (const next of byId.get(current)?.dependsOn ?? []) {
        if (!cameFrom.has(next)) {
          cameFrom.set(next, current);
          queue.push(next);
        }
      }
    }
  }
}

/**
 * Moves steps only as far as needed so every step comes after its dependencies, keeping the
 * reviewer's order otherwise (a stable topological sort). Leaves the list alone if it has a cycle.
 */
export function dependenciesFirst<S extends { id: string; dependsOn?: string[] }>(steps: S[]): S[] {
  const position = new Map(steps.map((step, index) => [step.id, index]));
  const waiting = steps.map(
    (step) => (step.dependsOn ?? []).filter((dep) => position.has(dep) && dep !== step.id).length,
  );
  const dependents = new Map<string, number[]>();
  steps.forEach((step, index) => {
    for (const dep of step.dependsOn ?? [])
      if (position.has(dep)) dependents.set(dep, [...(dependents.get(dep) ?? []), index]);
  });
  // A small binary heap of ready indices, so the earliest ready step always goes next.
  const heap: number[] = [];
  const push = (value: number) => {
    heap.push(value);
    for (let i = heap.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (heap[parent]! <= heap[i]!) break;
      [heap[parent], heap[i]] = [heap[i]!, heap[parent]!];
      i = parent;
    }
  };
  const pop = (): number => {
    const top = heap[0]!;
    const last = heap.pop()!;
    if (heap.length > 0) {
      heap[0] = last;
      for (let i = 0; ;) {
        const left = 2 * i + 1;
        const right = left + 1;
        let smallest = i;
        if (left < heap.length && heap[left]! < heap[smallest]!) smallest = left;
        if (right < heap.length && heap[right]! < heap[smallest]!) smallest = right;
        if (smallest === i) break;
        [heap[smallest], heap[i]] = [heap[i]!, heap[smallest]!];
        i = smallest;
      }
    }
    return top;
  };
  waiting.forEach((count, index) => count === 0 && push(index));
  const sorted: S[] = [];
  while (heap.length > 0) {
    const index = pop();
    sorted.push(steps[index]!);
    for (const dependent of dependents.get(steps[index]!.id) ?? []) if (--waiting[dependent]! === 0) push(dependent);
  }
  return sorted.length === steps.length ? sorted : steps;
}

/** A field as it takes effect: an absent retry policy is the default one. */
function comparable(key: string, value: unknown): unknown {
  return key === "retry" ? effectiveRetry(value as Partial<RetryPolicy> | undefined) : value;
}

function listIds(ids: string[]): string {
  return ids.length <= 1 ? (ids[0] ?? "") : `${ids.slice(0, -1).join(", ")} and ${ids.at(-1)}`;
}

const FIELD_NAMES: Record<string, string> = {
  dependsOn: "dependencies",
  args: "arguments",
  approvalRequired: "approval",
  timeoutSeconds: "timeout",
  retry: "retry policy",
  relevantFilePaths: "file paths",
  contextHints: "context hints",
  successCriteria: "success criteria",
  contextNotes: "context notes",
  estimatedDuration: "estimated duration",
};

function listFields(keys: string[]): string {
  return keys.length ? listIds(keys.map((key) => FIELD_NAMES[key] ?? key)) : "nothing";
}

export interface EditPlanInput {
  planId: string;
  baseVersion: number;
  edit: PlanEdit;
  author: string;
  /**
   * Who edits, as the authority policy sees them. A person's `approvalRequired: false` is a waiver,
   * made only if the policy lets them lower the gate (`gate.lower`); an agent's is raised to the
   * default, as an agent never waives.
   */
  editor: Principal;
  /** The policy that judges `editor` (see `SavePlanVersionInput.authority`). */
  authority?: Authority;
  /** See `SavePlanVersionInput.gateChangedSteps`: an edit of a plan whose run is under way by someone below approver. */
  gateChangedSteps?: boolean;
  /** The default workspace: file names are checked there when the plan has none of its own. */
  workspaceRoot?: string;
}

/**
 * Applies one edit to the plan's `baseVersion` and stores the result as the next version. Refuses
 * with `version_conflict` when the plan moved on, and with the reason when the edit is invalid.
 */
export async function editPlan(prisma: PrismaClient, tools: ToolRegistry, input: EditPlanInput): Promise<Plan> {
  const edit = planEditSchema.parse(input.edit);
  // One read for the version check, the id counter and the base content.
  const row = await prisma.plan.findUnique({
    where: { id: input.planId },
    select: {
      currentVersion: true,
      lastStepNumber: true,
      versions: {
        where: { version: input.baseVersion },
        select: {
          goal: true,
          summary: true,
          steps: true,
          successCriteria: true,
          questions: true,
          contextNotes: true,
          estimatedDuration: true,
          changeNote: true,
        },
      },
    },
  });
  if (!row) throw new AppError("not_found", `No plan ${input.planId}`);
  // Checked here as well as under savePlanVersion's lock, so an edit of a step that no longer
  // exists reports the real reason (someone else changed the plan), not "no such step".
  if (row.currentVersion !== input.baseVersion) {
    throw new AppError(
      "version_conflict",
      `This plan changed meanwhile: you edited version ${input.baseVersion}, the current version is ${row.currentVersion}.`,
      { currentVersion: row.currentVersion },
    );
  }
  const [baseRow] = row.versions;
  if (!baseRow) throw new AppError("not_found", `Plan ${input.planId} has no version ${input.baseVersion}`);
  const base: PlanContent = {
    goal: baseRow.goal,
    steps: baseRow.steps as unknown as Step[],
    successCriteria: baseRow.successCriteria as string[],
    questions: baseRow.questions as string[],
    ...(baseRow.summary !== null && { summary: baseRow.summary }),
    ...(baseRow.contextNotes !== null && { contextNotes: baseRow.contextNotes }),
    ...(baseRow.estimatedDuration !== null && { estimatedDuration: baseRow.estimatedDuration }),
  };
  const save = (
    draft: unknown,
    changeNote: string,
    extra: { source?: Plan["source"]; restoresVersion?: number; waivedGates?: string[] } = {},
  ) =>
    savePlanVersion(prisma, tools, {
      planId: input.planId,
      baseVersion: input.baseVersion,
      draft,
      source: extra.source ?? "manual",
      author: input.author,
      editor: input.editor,
      ...(input.authority && { authority: input.authority }),
      changeNote,
      ...(input.gateChangedSteps && { gateChangedSteps: true }),
      ...(input.workspaceRoot && { workspaceRoot: input.workspaceRoot }),
      ...(extra.restoresVersion !== undefined && { restoresVersion: extra.restoresVersion }),
      ...(extra.waivedGates && { waivedGates: extra.waivedGates }),
    });

  try {
    if (edit.kind === "undo") {
      if (input.baseVersion <= 1)
        throw new AppError("invalid_state", "Nothing to undo: this is the plan's first version");
      const previous = await getPlan(prisma, input.planId, input.baseVersion - 1);
      return await save(
        contentOf(previous),
        `Undid version ${input.baseVersion}${baseRow.changeNote ? ` (${baseRow.changeNote})` : ""}`,
        { restoresVersion: input.baseVersion - 1 },
      );
    }
    if (edit.kind === "import") {
      const imported = parsePlanJson(edit.planJson) as { goal?: unknown; steps?: unknown };
      if (!Array.isArray(imported.steps)) throw new AppError("invalid_input", "The imported JSON has no `steps` array");
      const steps = imported.steps.filter(
        (step): step is { id: string } => typeof (step as { id?: unknown })?.id === "string",
      );
      if (steps.length !== imported.steps.length)
        throw new AppError("invalid_input", "Every imported step needs a string `id`");
      // New steps get fresh ids; a refusal names them by the ids in the person's file.
      const { plan } = await revisePlan(prisma, tools, {
        planId: input.planId,
        baseVersion: input.baseVersion,
        revise: () => ({ goal: base.goal, ...imported, steps }),
        source: "import",
        author: input.author,
        ...(input.workspaceRoot && { workspaceRoot: input.workspaceRoot }),
        changeNote: "Imported from JSON",
        ...(input.gateChangedSteps && { gateChangedSteps: true }),
      });
      return plan;
    }
    const { draft, changeNote } = applyPlanEdit(base, edit, row.lastStepNumber);
    const waiver =
      input.editor.kind === "person" && edit.kind === "updateStep" && edit.changes.approvalRequired === false
        ? [edit.stepId]
        : [];
    return await save(draft, changeNote, { waivedGates: waiver });
  } catch (error) {
    throw explainRefusal(error);
  }
}

function contentOf(plan: Plan): PlanContent {
  const { goal, summary, steps, successCriteria, questions, contextNotes, estimatedDuration } = plan;
  return {
    goal,
    steps,
    successCriteria,
    questions,
    ...(summary !== undefined && { summary }),
    ...(contextNotes !== undefined && { contextNotes }),
    ...(estimatedDuration !== undefined && { estimatedDuration }),
  };
}

/** "The plan has problems" says nothing about which; a refused edit names them. */
function explainRefusal(error: unknown): unknown {
  if (!isAppError(error) || error.code !== "invalid_plan" || !Array.isArray(error.details)) return error;
  if (error.message !== "The plan has problems") return error;
  const issues = error.details as PlanIssue[];
  const shown = issues.slice(0, 3).map((issue) => issue.message);
  const more = issues.length > 3 ? ` (and ${issues.length - 3} more)` : "";
  return new AppError("invalid_plan", `This change was refused: ${shown.join("; ")}${more}`, issues);
}
