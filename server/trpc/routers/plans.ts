import { z } from "zod";
import { startRun } from "../../engine/engine";
import { MAX_PLAN_JSON_BYTES, parsePlanJson } from "../../plans/import";
import { PLAN_SOURCES } from "../../plans/schema";
import { createPlan, getPlan, listPlans } from "../../plans/service";
import { checkPlanDraft } from "../../plans/validate";
import { publicProcedure, router } from "../init";

const planJsonInput = z.object({
  goal: z.string().max(10_000).optional(),
  planJson: z.string().max(MAX_PLAN_JSON_BYTES * 2),
});

export const plansRouter = router({
  list: publicProcedure.query(({ ctx }) => listPlans(ctx.app.db.prisma)),

  get: publicProcedure
    .input(z.object({ planId: z.string(), version: z.number().int().positive().optional() }))
    .query(async ({ ctx, input }) => {
      const plan = await getPlan(ctx.app.db.prisma, input.planId, input.version);
      const issues = checkPlanDraft(plan, ctx.app.tools).issues;
      return { plan, issues };
    }),

  /** Dry run of the create form: every issue, nothing stored. */
  check: publicProcedure.input(planJsonInput).mutation(({ ctx, input }) => {
    return checkPlanDraft(parsePlanJson(input.planJson, input.goal), ctx.app.tools).issues;
  }),

  createFromJson: publicProcedure
    .input(planJsonInput.extend({ source: z.enum(PLAN_SOURCES).default("manual") }))
    .mutation(({ ctx, input }) =>
      createPlan(ctx.app.db.prisma, ctx.app.tools, {
        draft: parsePlanJson(input.planJson, input.goal),
        source: input.source,
        author: ctx.actor,
      }),
    ),

  approve: publicProcedure
    .input(
      z.object({
        planId: z.string(),
        version: z.number().int().positive(),
        maxParallel: z.number().int().min(1).max(256).optional(),
      }),
    )
    .mutation(({ ctx, input }) =>
      startRun(ctx.app.engine, {
        planId: input.planId,
        version: input.version,
        actor: ctx.actor,
        workspaceRoot: ctx.app.workspaceRoot,
        ...(input.maxParallel !== undefined && { maxParallel: input.maxParallel }),
      }),
    ),
});
