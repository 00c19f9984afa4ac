import { z } from "zod";
import { describePlannerConfig } from "../../planner/config";
import { plannerFor } from "../../planner/deps";
import { listRecoveryProposals } from "../../planner/recovery-proposals";
import { getPlanningSession, listPlanningSessions } from "../../planner/sessions";
import { getUsage } from "../../planner/usage";
import { describeSandbox } from "../../tools/sandbox";
import { listWorkspaces } from "../../plans/workspaces";
import { planningCommand, planningMessage } from "../../operations/planning";
import {
  plannerAddSuggestion,
  plannerAnswer,
  plannerCancel,
  plannerRegenerate,
  plannerRetry,
  plannerStart,
  plannerSuggest,
  recoveryDecide,
  recoveryPropose,
} from "../../operations/planner";
import { viaOperation } from "../../operations/operation";
import { operationProcedure, publicProcedure, router } from "../init";
import { trackedEvents } from "../tracked-events";

const sessionInput = z.object({ sessionId: z.uuid() });

export const plannerRouter = router({
  /** What is configured (never the keys) and which workspaces a task can plan against. */
  options: publicProcedure.query(async ({ ctx }) => {
    const planner = plannerFor(ctx.app);
    const workspaces = await listWorkspaces(ctx.app.db.pool, ctx.app.workspaceRoot);
    return {
      config: describePlannerConfig(planner.config),
      defaultWorkspace: ctx.app.workspaceRoot,
      // Whether this process confines unapproved commands, and what its self-test proved.
      sandbox: describeSandbox(),
      workspaces: workspaces.map((workspace) => ({
        id: workspace.id,
        name: workspace.name,
        path: workspace.path,
        isDefault: workspace.isDefault,
      })),
    };
  }),

  start: operationProcedure(plannerStart).mutation(viaOperation(plannerStart)),

  /** Seed 002's `/plan [task]`, `/plan status`, `/plan cancel`. */
  command: operationProcedure(planningCommand).mutation(viaOperation(planningCommand)),
  /** Seed 002: a message while the planner gathers joins its context. */
  message: operationProcedure(planningMessage).mutation(viaOperation(planningMessage)),

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

  cancel: operationProcedure(plannerCancel).mutation(viaOperation(plannerCancel)),

  retry: operationProcedure(plannerRetry).mutation(viaOperation(plannerRetry)),

  answer: operationProcedure(plannerAnswer).mutation(viaOperation(plannerAnswer)),

  regenerate: operationProcedure(plannerRegenerate).mutation(viaOperation(plannerRegenerate)),

  suggest: operationProcedure(plannerSuggest).mutation(viaOperation(plannerSuggest)),

  addSuggestion: operationProcedure(plannerAddSuggestion).mutation(viaOperation(plannerAddSuggestion)),

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

  proposeRecovery: operationProcedure(recoveryPropose).mutation(viaOperation(recoveryPropose)),

  recoveryProposals: publicProcedure
    .input(z.object({ runId: z.uuid(), stepId: z.string().optional() }))
    .query(({ ctx, input }) => listRecoveryProposals(plannerFor(ctx.app), input)),

  decideRecovery: operationProcedure(recoveryDecide).mutation(viaOperation(recoveryDecide)),
});
