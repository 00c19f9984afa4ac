import { z } from "zod";
import { retryPolicySchema, riskSchema, stepTypeSchema, type PlanContent, type StepInput } from "../plan-schema";

/** The shape of one plan edit as the doors accept it, and of the draft an edit produces. */

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
    /** `null` removes the condition, the fan-out or its cap. */
    when: z.string().trim().min(1).max(1_000).nullable(),
    forEach: z.string().trim().min(1).max(200).nullable(),
    maxItems: z.number().int().min(1).max(1_000).nullable(),
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
export type ContentEdit = Exclude<ParsedPlanEdit, { kind: "undo" } | { kind: "import" }>;

/** A plan draft in the shape `checkPlanDraft` accepts; steps may leave tool defaults unset. */
export interface PlanDraftContent extends Omit<PlanContent, "steps"> {
  steps: StepInput[];
}

export interface EditResult {
  draft: PlanDraftContent;
  changeNote: string;
}
