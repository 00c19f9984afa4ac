import { conditionInWords } from "../plans/conditions";
import { z } from "zod";
import { AppError } from "../errors";
import { listComments } from "../plans/comments";
import { diffPlans, planDiffSchema } from "../plans/diff";
import {
  describeTools,
  exportPlanJson,
  exportPlanMarkdown,
  planExportSchema,
  toolDescriptionSchema,
} from "../plans/export";
import { lifecycleStateOf } from "../plans/lifecycle";
import { findOverlaps, overlapFixLabel, overlapMessage } from "../plans/overlap";
import { getPlan } from "../plans/service";
import { checkPlanDraft } from "../plans/validate";
import { listPlanVersions, planVersionSummarySchema } from "../plans/versions";
import { assessStep, stepAssessmentSchema } from "../tools/assessment";
import { planIssueSchema, planSchema } from "../plan-schema";
import { PLAN_LIFECYCLE_STATES } from "../vocabulary";
import { defineOperation } from "./operation";
import { PERSON_OR_AGENT } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * The review page's reads of a plan — its checks, lifecycle, history, diff, export, the computed
 * risk of each step, and the tools a step may use — as operations, so the tRPC door is an adapter
 * like every other. None of them shows anything an agent may not read (an agent already reads
 * plans with plan.get), so both kinds of caller may. Outputs are the domain's own schemas
 * (plain JSON Schema types, which MCP can describe).
 */
const planId = z.string().min(1).max(100);
const version = z.number().int().positive();

export const planView = defineOperation({
  name: "plan.view",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A plan version with what its checks find against today's tools and workspaces",
  input: z.object({ planId, version: version.optional() }),
  output: z.object({
    plan: planSchema,
    issues: z.array(planIssueSchema).describe("What the checks find: {code, message, stepId?, path?}"),
  }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const plan = await getPlan(app.db.prisma, input.planId, input.version);
    return { plan, issues: checkPlanDraft(plan, app.tools).issues };
  },
});

export const planAssessments = defineOperation({
  name: "plan.assessments",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary:
    "Risk and capability of each step of a version, judged from its tool and command — never the author's claims",
  input: z.object({ planId, version }),
  output: z.object({
    assessments: z
      .record(z.string(), stepAssessmentSchema.extend({ conditionWords: z.string().optional() }))
      .describe("Per step id: {risk, capability, capabilityLabel}, and conditionWords: the step's `when` in words"),
  }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const plan = await getPlan(app.db.prisma, input.planId, input.version);
    return {
      assessments: Object.fromEntries(
        plan.steps.map((step) => [
          step.id,
          {
            ...assessStep(app.tools, step.tool, step.args),
            ...(step.when && { conditionWords: conditionInWords(step.when) }),
          },
        ]),
      ),
    };
  },
});

export const planLifecycle = defineOperation({
  name: "plan.lifecycle",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Whether a person set the plan aside (rejected or archived), and how many runs it had",
  input: z.object({ planId }),
  output: z.object({
    state: z.enum(PLAN_LIFECYCLE_STATES),
    rejectedVersion: z.number().nullable(),
    archivedAt: z.string().nullable(),
    runs: z.number(),
  }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const row = await app.db.prisma.plan.findUnique({
      where: { id: input.planId },
      select: { rejectedAt: true, rejectedVersion: true, archivedAt: true, _count: { select: { runs: true } } },
    });
    if (!row) throw new AppError("not_found", `No plan ${input.planId}`);
    return {
      state: lifecycleStateOf(row),
      rejectedVersion: row.rejectedVersion,
      archivedAt: row.archivedAt?.toISOString() ?? null,
      runs: row._count.runs,
    };
  },
});

export const planVersions = defineOperation({
  name: "plan.versions",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A plan's versions, newest first: who made each and why",
  input: z.object({ planId }),
  output: z.object({
    versions: z.array(planVersionSummarySchema).describe("Newest first: who made each version, from where, and why"),
  }),
  annotations: { readOnly: true },
  run: async ({ app }, input) => ({ versions: await listPlanVersions(app.db.prisma, input.planId) }),
});

export const planDiff = defineOperation({
  name: "plan.diff",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "What changed between two versions of a plan, step by step",
  input: z.object({ planId, from: version, to: version }),
  output: planDiffSchema,
  annotations: { readOnly: true },
  async run({ app }, input) {
    const [before, after] = await Promise.all([
      getPlan(app.db.prisma, input.planId, input.from),
      getPlan(app.db.prisma, input.planId, input.to),
    ]);
    return diffPlans(before, after);
  },
});

export const planExport = defineOperation({
  name: "plan.export",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A plan version as a file: JSON (importable again) or Markdown with its review comments",
  input: z.object({ planId, version: version.optional(), format: z.enum(["json", "markdown"]) }),
  output: planExportSchema,
  annotations: { readOnly: true },
  async run({ app }, input) {
    const plan = await getPlan(app.db.prisma, input.planId, input.version);
    if (input.format === "json") return exportPlanJson(plan);
    return exportPlanMarkdown(plan, await listComments(app.db.prisma, input.planId));
  },
});

export const planTools = defineOperation({
  name: "plan.tools",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "The tools a step may use, with their input as JSON Schema",
  input: z.object({}),
  output: z.object({
    tools: z.array(toolDescriptionSchema),
  }),
  annotations: { readOnly: true },
  run: async ({ app }) => ({ tools: describeTools(app.tools) }),
});

/**
 * Steps of a version that may run at the same time and touch the same files (their relevant
 * paths overlap), each with the dependency that would serialise them (`server/plans/overlap.ts`).
 */
export const planOverlaps = defineOperation({
  name: "plan.overlaps",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Steps that may run in parallel and touch the same files, with the dependency that serialises each pair",
  input: z.object({ planId, version }),
  output: z.object({
    overlaps: z.array(
      z.object({
        first: z.string(),
        second: z.string(),
        paths: z.array(z.string()),
        message: z.string(),
        fixLabel: z.string(),
      }),
    ),
  }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const plan = await getPlan(app.db.prisma, input.planId, input.version);
    return {
      overlaps: findOverlaps(plan.steps).map((warning) => ({
        ...warning,
        message: overlapMessage(warning),
        fixLabel: overlapFixLabel(warning),
      })),
    };
  },
});

export const planReadOperations = [
  planView,
  planAssessments,
  planOverlaps,
  planLifecycle,
  planVersions,
  planDiff,
  planExport,
  planTools,
] as AnyOperation[];
