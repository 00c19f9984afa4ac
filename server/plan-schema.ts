import { z } from "zod";
import { PLAN_SOURCES } from "./vocabulary";

/**
 * One schema for plans and steps, shared by the server, client forms, the HTTP API and MCP.
 * `*InputSchema` is what authors send (most fields optional); the normalised types carry every
 * field filled in, with tool metadata as defaults.
 */

export { STEP_STATUSES, stepStatusSchema, type StepStatus } from "./vocabulary";

export const riskSchema = z.enum(["low", "medium", "high"]);
export const stepTypeSchema = z.enum(["feature", "bugfix", "chore", "test", "docs", "refactor", "research", "ops"]);

export const retryPolicySchema = z.object({
  maxAttempts: z.number().int().min(1).max(20).default(3),
  backoffMs: z.number().int().min(0).max(600_000).default(500),
});
export type RetryPolicy = z.infer<typeof retryPolicySchema>;

const MAX_TEXT = 10_000;

export const stepInputSchema = z.object({
  id: z.string().min(1).max(64),
  order: z.number().int().optional(),
  title: z.string().max(200).optional(),
  description: z.string().max(MAX_TEXT).default(""),
  tool: z.string().min(1).max(100),
  args: z.record(z.string(), z.unknown()).default({}),
  dependsOn: z.array(z.string()).default([]),
  approvalRequired: z.boolean().optional(),
  capability: z.string().optional(),
  capabilityLabel: z.string().optional(),
  labels: z.array(z.string()).default([]),
  timeoutSeconds: z.number().int().min(1).max(86_400).optional(),
  risk: riskSchema.optional(),
  critical: z.boolean().default(false),
  retry: retryPolicySchema.partial().optional(),
  contextHints: z.array(z.string()).default([]),
  relevantFilePaths: z.array(z.string()).default([]),
  /** An agent task's acceptance criteria: how the agent (and the person reviewing) knows it is done. */
  acceptance: z.array(z.string().max(2_000)).max(50).optional(),
  type: stepTypeSchema.optional(),
  skipped: z.boolean().default(false),
});
export type StepInput = z.input<typeof stepInputSchema>;

/**
 * A step as every interface shows it: the author's input with every field filled in. The schema is
 * the type, so an operation's output parse and the domain agree field by field. The fields with a
 * default in `stepInputSchema` keep it here, so a version stored before a field existed still reads.
 */
export const stepSchema = z.object({
  id: z.string(),
  order: z.number(),
  title: z.string().optional(),
  description: z.string().default(""),
  tool: z.string(),
  args: z.record(z.string(), z.unknown()).default({}),
  dependsOn: z.array(z.string()).default([]),
  approvalRequired: z.boolean(),
  capability: z.string(),
  capabilityLabel: z.string(),
  labels: z.array(z.string()).default([]),
  timeoutSeconds: z.number(),
  risk: riskSchema,
  critical: z.boolean().default(false),
  retry: z.object({ maxAttempts: z.number(), backoffMs: z.number() }),
  contextHints: z.array(z.string()).default([]),
  relevantFilePaths: z.array(z.string()).default([]),
  acceptance: z.array(z.string()).optional(),
  type: stepTypeSchema.optional(),
  /** Skipped by the reviewer before the run: the engine marks it skipped without executing it. */
  skipped: z.boolean().default(false),
});
export type Step = z.output<typeof stepSchema>;

export const planDraftSchema = z.object({
  goal: z.string().trim().min(1, "A plan needs a goal").max(MAX_TEXT),
  summary: z.string().max(MAX_TEXT).optional(),
  steps: z.array(stepInputSchema).max(20_000),
  successCriteria: z.array(z.string()).default([]),
  questions: z.array(z.string()).default([]),
  contextNotes: z.string().max(MAX_TEXT).optional(),
  estimatedDuration: z.number().int().min(0).optional(),
});
export type PlanDraft = z.input<typeof planDraftSchema>;
export type ParsedPlanDraft = z.output<typeof planDraftSchema>;

export const planContentSchema = z.object({
  goal: z.string(),
  summary: z.string().optional(),
  steps: z.array(stepSchema),
  successCriteria: z.array(z.string()).default([]),
  questions: z.array(z.string()).default([]),
  contextNotes: z.string().optional(),
  estimatedDuration: z.number().optional(),
});
export type PlanContent = z.output<typeof planContentSchema>;

export type PlanSource = (typeof PLAN_SOURCES)[number];

/** One finding of the quality gates kept with a version as advice for its reviewer. */
export const planAdviceSchema = z.object({
  code: z.string(),
  stepId: z.string().optional(),
  path: z.array(z.union([z.string(), z.number()])).optional(),
  message: z.string(),
});
export type PlanAdvice = z.output<typeof planAdviceSchema>;

/** A plan version as every interface shows it. */
export const planSchema = planContentSchema.extend({
  id: z.string(),
  taskId: z.string(),
  version: z.number(),
  source: z.enum(PLAN_SOURCES),
  model: z.string().optional(),
  usage: z.object({ inputTokens: z.number(), outputTokens: z.number() }).optional(),
  traceId: z.string(),
  author: z.string(),
  createdAt: z.string(),
  /** What the quality gates found when the version was stored with advice instead of a refusal. */
  advice: z
    .array(planAdviceSchema)
    .optional()
    .describe("What the quality gates found in a plan accepted with advice (an agent's plan-mode plan)"),
});
export type Plan = z.output<typeof planSchema>;

/** What a check found wrong with a plan: schema, ids, tools, arguments, dependencies, references. */
export const PLAN_ISSUE_CODES = [
  "schema",
  "duplicate_step_id",
  "unknown_tool",
  "tool_unavailable",
  "invalid_args",
  "unknown_dependency",
  "self_dependency",
  "cycle",
  "invalid_reference",
  /** A `$step` reference whose declared output type can never fit the argument it fills. */
  "reference_type_mismatch",
] as const;
export type PlanIssueCode = (typeof PLAN_ISSUE_CODES)[number];

export const planIssueSchema = z.object({
  code: z.enum(PLAN_ISSUE_CODES),
  message: z.string(),
  stepId: z.string().optional(),
  /** The steps on a cycle, in dependency order. */
  steps: z.array(z.string()).optional(),
  /** Path inside the step (for args: ["args", ...]) or inside the plan for schema issues. */
  path: z.array(z.union([z.string(), z.number()])).optional(),
});
export type PlanIssue = z.output<typeof planIssueSchema>;
