import { z } from "zod";
import { stepInputSchema } from "../../plans/schema";
import { describePlannerConfig } from "../../planner/config";
import { plannerFor } from "../../planner/deps";
import { decideRecovery, listRecoveryProposals, proposeRecovery } from "../../planner/recovery-proposals";
import {
  answerQuestion,
  cancelPlanning,
  getPlanningSession,
  listPlanningSessions,
  retryPlanning,
  startPlanning,
  startRegeneration,
} from "../../planner/sessions";
import { addSuggestedStep, suggestSteps } from "../../planner/suggest";
import { getUsage } from "../../planner/usage";
import { listWorkspaces, requireWorkspace } from "../../plans/workspaces";
import { planningCommand } from "../../operations/planning";
import { viaOperation } from "../../operations/operation";
import { operationProcedure, publicProcedure, router } from "../init";
import { trackedEvents } from "../tracked-events";

// Generous transport bounds; the planner refuses long goals itself with a clear message.
const text = z.string().max(100_000);
const sessionInput = z.object({ sessionId: z.uuid() });
const mode = z.enum(["quick", "deep"]);

export const plannerRouter = router({
  /** What is configured (never the keys) and which workspaces a task can plan against. */
  options: publicProcedure.query(async ({ ctx }) => {
    const planner = plannerFor(ctx.app);
    const workspaces = await listWorkspaces(ctx.app.db.pool, ctx.app.workspaceRoot);
    return {
      config: describePlannerConfig(planner.config),
      defaultWorkspace: ctx.app.workspaceRoot,
      workspaces: workspaces.map((workspace) => ({
        id: workspace.id,
        name: workspace.name,
        path: workspace.path,
        isDefault: workspace.isDefault,
      })),
    };
  }),

  start: publicProcedure
    .input(
      z.object({
        goal: text,
        mode: mode.default("quick"),
        model: z.string().max(200).optional(),
        workspaceId: z.uuid().nullish(),
        useJudge: z.boolean().optional(),
      }),
    )
    .mutation(async ({ ctx, input }) => {
      // A removed workspace is refused here: the session would otherwise act in it.
      if (input.workspaceId) await requireWorkspace(ctx.app.db.pool, input.workspaceId);
      return startPlanning(plannerFor(ctx.app), { ...input, actor: ctx.actor });
    }),

  /** Seed 002's `/plan [task]`, `/plan status`, `/plan cancel`. */
  command: operationProcedure(planningCommand).mutation(viaOperation(planningCommand)),

  session: publicProcedure
    .input(sessionInput)
    .query(({ ctx, input }) => getPlanningSession(plannerFor(ctx.app), input.sessionId)),

  sessions: publicProcedure
    .input(z.object({ planId: z.string().optional() }).optional())
    .query(({ ctx, input }) => listPlanningSessions(plannerFor(ctx.app), input ?? {})),

  /** The session's progress events after `lastEventId`, replayed then live (like runs.events). */
  events: publicProcedure
    .input(z.object({ sessionId: z.uuid(), lastEventId: z.string().nullish() }))
    .subscription(({ ctx, input, signal }) => trackedEvents(ctx.app, input.sessionId, input.lastEventId, signal)),

  cancel: publicProcedure
    .input(sessionInput)
    .mutation(({ ctx, input }) => cancelPlanning(plannerFor(ctx.app), input.sessionId, ctx.actor)),

  retry: publicProcedure
    .input(sessionInput)
    .mutation(({ ctx, input }) => retryPlanning(plannerFor(ctx.app), input.sessionId, ctx.actor)),

  answer: publicProcedure
    .input(z.object({ sessionId: z.uuid(), questionId: z.uuid(), answer: text }))
    .mutation(({ ctx, input }) => answerQuestion(plannerFor(ctx.app), { ...input, actor: ctx.actor })),

  regenerate: publicProcedure
    .input(
      z.object({
        planId: z.string(),
        baseVersion: z.number().int().positive(),
        feedback: text,
        mode: mode.optional(),
        model: z.string().max(200).optional(),
        useJudge: z.boolean().optional(),
      }),
    )
    .mutation(({ ctx, input }) => startRegeneration(plannerFor(ctx.app), { ...input, actor: ctx.actor })),

  suggest: publicProcedure
    .input(
      z.object({
        planId: z.string(),
        version: z.number().int().positive().optional(),
        model: z.string().max(200).optional(),
      }),
    )
    .mutation(({ ctx, input }) => suggestSteps(plannerFor(ctx.app), input)),

  addSuggestion: publicProcedure
    .input(z.object({ planId: z.string(), baseVersion: z.number().int().positive(), step: stepInputSchema }))
    .mutation(({ ctx, input }) => addSuggestedStep(plannerFor(ctx.app), { ...input, actor: ctx.actor })),

  usage: publicProcedure
    .input(
      // The step scope first: an object schema drops keys it does not know, so `{runId}` would
      // swallow `{runId, stepId}`.
      z.union([
        z.object({ runId: z.uuid(), stepId: z.string().max(100) }),
        z.object({ sessionId: z.uuid() }),
        z.object({ planId: z.string() }),
        z.object({ runId: z.uuid() }),
      ]),
    )
    .query(({ ctx, input }) => getUsage(ctx.app.db.prisma, input)),

  proposeRecovery: publicProcedure
    .input(z.object({ runId: z.uuid(), stepId: z.string(), model: z.string().max(200).optional() }))
    .mutation(({ ctx, input }) => proposeRecovery(plannerFor(ctx.app), { ...input, actor: ctx.actor })),

  recoveryProposals: publicProcedure
    .input(z.object({ runId: z.uuid(), stepId: z.string().optional() }))
    .query(({ ctx, input }) => listRecoveryProposals(plannerFor(ctx.app), input)),

  decideRecovery: publicProcedure
    .input(z.object({ proposalId: z.uuid(), accept: z.boolean() }))
    .mutation(({ ctx, input }) => decideRecovery(plannerFor(ctx.app), { ...input, actor: ctx.actor })),
});
