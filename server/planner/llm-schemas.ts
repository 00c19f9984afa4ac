import { z } from "zod";
import { riskSchema, stepTypeSchema } from "../plan-schema";

/**
 * What the model is asked to produce. Deliberately lenient where the quality gates check (a
 * missing `type` or hint is a gate failure the model can fix, not an unreadable answer); the
 * plan itself is validated by `runQualityGates`.
 */
export const llmStepSchema = z.object({
  id: z.string().describe("Unique id: step_1, step_2, …"),
  title: z.string().optional().describe("Short imperative title"),
  description: z.string().describe("What this step does and why, specific enough to review"),
  tool: z.string().describe("Exactly one tool from the catalogue"),
  args: z.record(z.string(), z.unknown()).describe("Arguments valid for the tool's input schema"),
  dependsOn: z.array(z.string()).describe("Ids of steps that must finish first"),
  approvalRequired: z.boolean().optional().describe("true for destructive steps (writes, deletes, commits)"),
  risk: riskSchema.optional(),
  type: stepTypeSchema.optional(),
  contextHints: z.array(z.string()).optional().describe("Actionable pointers: 'Read `spec.md` section 2'"),
  relevantFilePaths: z.array(z.string()).optional().describe("Existing workspace files this step involves"),
  when: z
    .string()
    .optional()
    .describe(
      'Run only if this holds, e.g. "$step_2.exitCode != 0", "$step_3.paths.length > 0", \'$step_1.status == "failed"\' (compare, &&, ||, !)',
    ),
  forEach: z
    .string()
    .optional()
    .describe(
      'Run once per element of an earlier list output, e.g. "$step_2.paths"; use "$item" in args for the element',
    ),
  maxItems: z.number().optional().describe("forEach: the most elements to run (default 100, at most 1000)"),
});

export const llmPlanSchema = z.object({
  summary: z.string().describe("1-3 sentence overview"),
  steps: z.array(llmStepSchema),
  successCriteria: z.array(z.string()).optional(),
  questions: z.array(z.string()).optional().describe("Unresolved questions for the user"),
  contextNotes: z.string().optional().describe("Key findings about the workspace"),
  estimatedDuration: z.number().optional().describe("Seconds"),
});
export type LlmPlan = z.infer<typeof llmPlanSchema>;

/** Seed 003 P-2: the judge answers only with this. */
export const judgeVerdictSchema = z.object({
  is_approved: z.boolean(),
  feedback: z.string(),
});
export type JudgeVerdict = z.infer<typeof judgeVerdictSchema>;

export const suggestionsSchema = z.object({
  suggestions: z
    .array(
      z.object({
        reason: z.string().describe("Why: the TODO/FIXME or gap this addresses, with its file"),
        step: llmStepSchema,
      }),
    )
    .max(10),
});

export const recoveryProposalSchema = z.object({
  reasoning: z.string().describe("Why this is the best way forward, in 1-4 sentences"),
  action: z.object({
    kind: z.enum(["retry", "skip", "insert_steps", "abort"]),
    args: z.record(z.string(), z.unknown()).optional().describe("retry: the complete new arguments"),
    steps: z.array(llmStepSchema).optional().describe("insert_steps: steps to run before retrying"),
  }),
});
export type LlmRecoveryProposal = z.infer<typeof recoveryProposalSchema>;

/** A model's plan as a plan draft for `goal`: the shape every validation and store function takes. */
export function toPlanDraft(goal: string, plan: Partial<LlmPlan>): Record<string, unknown> {
  return {
    goal,
    ...(plan.summary !== undefined && { summary: plan.summary }),
    steps: plan.steps ?? [],
    successCriteria: plan.successCriteria ?? [],
    questions: plan.questions ?? [],
    ...(plan.contextNotes !== undefined && { contextNotes: plan.contextNotes }),
    ...(typeof plan.estimatedDuration === "number" && {
      estimatedDuration: Math.max(0, Math.round(plan.estimatedDuration)),
    }),
  };
}
