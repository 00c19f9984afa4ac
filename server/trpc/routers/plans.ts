import { z } from "zod";
import { listComments } from "../../plans/comments";
import { assessStep } from "../../tools/assessment";
import { diffPlans } from "../../plans/diff";
import { planEditSchema } from "../../plans/edits";
import { describeTools, exportPlanJson, exportPlanMarkdown } from "../../plans/export";
import { MAX_PLAN_JSON_BYTES, parsePlanJson } from "../../plans/import";
import { PLAN_SOURCES, type Plan } from "../../plans/schema";
import { createPlan, getPlan, listPlans } from "../../plans/service";
import { checkPlanDraft } from "../../plans/validate";
import { AppError } from "../../errors";
import { lifecycleStateOf } from "../../plans/lifecycle";
import { listPlanVersions } from "../../plans/versions";
import { requireWorkspace } from "../../plans/workspaces";
import { planApprove, planEdit, planReview, planReviewStatus } from "../../operations/plans";
import { viaOperation } from "../../operations/operation";
import { planArchive, planRestore } from "../../operations/plan-lifecycle";
import { planComment, planCommentResolve, planComments, planReviseFromComments } from "../../operations/plan-comments";
import { publicProcedure, router } from "../init";

const planId = z.string().min(1).max(64);
const version = z.number().int().positive();

const planJsonInput = z.object({
  goal: z.string().max(10_000).optional(),
  planJson: z.string().max(MAX_PLAN_JSON_BYTES * 2),
});

export const plansRouter = router({
  /** Active plans by default; `show: "archived"` lists the archived and rejected ones. */
  list: publicProcedure
    .input(z.object({ show: z.enum(["active", "archived"]).default("active") }).optional())
    .query(({ ctx, input }) => listPlans(ctx.app.db.prisma, { show: input?.show ?? "active" })),
  /** Archive and restore (server/operations/plan-lifecycle.ts); reject is `review`. */
  archive: publicProcedure.input(planArchive.input).mutation(viaOperation(planArchive)),
  restore: publicProcedure.input(planRestore.input).mutation(viaOperation(planRestore)),

  get: publicProcedure
    .input(z.object({ planId: z.string(), version: z.number().int().positive().optional() }))
    .query(async ({ ctx, input }) => {
      const plan = await getPlan(ctx.app.db.prisma, input.planId, input.version);
      const issues = checkPlanDraft(plan, ctx.app.tools).issues;
      return { plan, issues };
    }),

  /**
   * Risk and capability of each step of a version, judged from its tool and command (the shell
   * read-only analysis): what the plan page shows instead of the author's claims.
   */
  assessments: publicProcedure
    .input(z.object({ planId: z.string(), version: z.number().int().positive() }))
    .query(async ({ ctx, input }) => {
      const plan = await getPlan(ctx.app.db.prisma, input.planId, input.version);
      return Object.fromEntries(plan.steps.map((step) => [step.id, assessStep(ctx.app.tools, step.tool, step.args)]));
    }),

  /** Whether a person set the plan aside: rejected (seed 002) or archived; and whether it ever ran. */
  lifecycle: publicProcedure.input(z.object({ planId })).query(async ({ ctx, input }) => {
    const row = await ctx.app.db.prisma.plan.findUnique({
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
  }),

  createFromJson: publicProcedure
    .input(planJsonInput.extend({ source: z.enum(PLAN_SOURCES).default("manual"), workspaceId: z.uuid().optional() }))
    .mutation(async ({ ctx, input }) => {
      if (input.workspaceId) await requireWorkspace(ctx.app.db.pool, input.workspaceId);
      return createPlan(ctx.app.db.prisma, ctx.app.tools, {
        draft: parsePlanJson(input.planJson, input.goal),
        source: input.source,
        author: ctx.actor,
        ...(input.workspaceId && { workspaceId: input.workspaceId }),
        workspaceRoot: ctx.app.workspaceRoot,
      });
    }),

  /** A person approves exactly this version; its run starts (server/operations/plans.ts). */
  approve: publicProcedure.input(planApprove.input).mutation(viaOperation(planApprove)),
  /** Reject, or send back with instructions (seed 002); the agent reads it with plan_review_status. */
  review: publicProcedure.input(planReview.input).mutation(viaOperation(planReview)),
  reviewStatus: publicProcedure.input(planReviewStatus.input).query(viaOperation(planReviewStatus)),

  /** Review comments (server/operations/plan-comments.ts): threads per step, resolve, revise from them. */
  comments: publicProcedure.input(planComments.input).query(viaOperation(planComments)),
  comment: publicProcedure.input(planComment.input).mutation(viaOperation(planComment)),
  resolveComment: publicProcedure.input(planCommentResolve.input).mutation(viaOperation(planCommentResolve)),
  reviseFromComments: publicProcedure
    .input(planReviseFromComments.input)
    .mutation(viaOperation(planReviseFromComments)),

  /** Tools with their input as JSON Schema, for the step editor's generated argument forms. */
  tools: publicProcedure.query(({ ctx }) => describeTools(ctx.app.tools)),

  /**
   * One edit of the review page, made on `baseVersion`. Stores the next version and returns it
   * (a stored version is always valid, hence no issues); a stale base is a `version_conflict`.
   */
  edit: publicProcedure
    .input(z.object({ planId, baseVersion: version, edit: planEditSchema }))
    .mutation(async ({ ctx, input }) => {
      const plan = (await viaOperation(planEdit)({ ctx, input })) as unknown as Plan;
      return { plan, issues: [] as ReturnType<typeof checkPlanDraft>["issues"] };
    }),

  versions: publicProcedure
    .input(z.object({ planId }))
    .query(({ ctx, input }) => listPlanVersions(ctx.app.db.prisma, input.planId)),

  diff: publicProcedure.input(z.object({ planId, from: version, to: version })).query(async ({ ctx, input }) => {
    const [before, after] = await Promise.all([
      getPlan(ctx.app.db.prisma, input.planId, input.from),
      getPlan(ctx.app.db.prisma, input.planId, input.to),
    ]);
    return diffPlans(before, after);
  }),

  export: publicProcedure
    .input(z.object({ planId, version: version.optional(), format: z.enum(["json", "markdown"]) }))
    .query(async ({ ctx, input }) => {
      const plan = await getPlan(ctx.app.db.prisma, input.planId, input.version);
      if (input.format === "json") return exportPlanJson(plan);
      return exportPlanMarkdown(plan, await listComments(ctx.app.db.prisma, input.planId));
    }),
});
