import { AppError, isAppError } from "../errors";
import type { PrismaClient } from "../generated/prisma/client";
import type { Authority, Principal } from "../policy/authority";
import type { ToolRegistry } from "../tools/registry";
import { applyPlanEdit } from "./apply-edit";
import { planEditSchema, type PlanEdit } from "./edit-schema";
import { parsePlanJson } from "./import";
import type { Plan, PlanContent, PlanIssue, Step } from "../plan-schema";
import { getPlan } from "./service";
import { revisePlan, savePlanVersion } from "./versions";

/**
 * The edits a reviewer makes on the plan page. Each is a pure function from the base version's
 * content to a complete new draft; `editPlan` stores that draft through `savePlanVersion`, which
 * validates it and refuses it when the base version is no longer current.
 */
export { applyPlanEdit, dependenciesFirst } from "./apply-edit";
export {
  newStepSchema,
  planChangesSchema,
  planEditSchema,
  stepChangesSchema,
  type EditResult,
  type PlanDraftContent,
  type PlanEdit,
  type StepChanges,
} from "./edit-schema";

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
  const { base, lastStepNumber, changeNote: baseChangeNote } = await readBaseVersion(prisma, input);
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
        `Undid version ${input.baseVersion}${baseChangeNote ? ` (${baseChangeNote})` : ""}`,
        { restoresVersion: input.baseVersion - 1 },
      );
    }
    if (edit.kind === "import") return await importPlanJson(prisma, tools, input, base, edit.planJson);
    const { draft, changeNote } = applyPlanEdit(base, edit, lastStepNumber);
    const waiver =
      input.editor.kind === "person" && edit.kind === "updateStep" && edit.changes.approvalRequired === false
        ? [edit.stepId]
        : [];
    return await save(draft, changeNote, { waivedGates: waiver });
  } catch (error) {
    throw explainRefusal(error);
  }
}

/**
 * The content of the edited version, with the plan's step id counter and the version's change
 * note, in one read that also checks the version is still the current one.
 */
async function readBaseVersion(
  prisma: PrismaClient,
  input: EditPlanInput,
): Promise<{ base: PlanContent; lastStepNumber: number; changeNote: string | null }> {
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
  return { base, lastStepNumber: row.lastStepNumber, changeNote: baseRow.changeNote };
}

/** Replaces the plan's content with a plan file's; new steps get fresh ids. */
async function importPlanJson(
  prisma: PrismaClient,
  tools: ToolRegistry,
  input: EditPlanInput,
  base: PlanContent,
  planJson: string,
): Promise<Plan> {
  const imported = parsePlanJson(planJson) as { goal?: unknown; steps?: unknown };
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
