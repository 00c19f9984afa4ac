import { z } from "zod";
import {
  answerQuestion,
  cancelRun,
  decideApproval,
  pauseRun,
  resumeRun,
  retryStep,
  skipStep,
} from "../../engine/engine";
import { applyRecoveryAction, rerunFrom } from "../../engine/recovery";
import { recoveryActionSchema } from "../../engine/recovery-action";
import { getRun, listRuns } from "../../engine/run-view";
import {
  listRunDecisions,
  listRunSummaries,
  readRunEvents,
  runEventsInputSchema,
  runListInputSchema,
} from "../../engine/run-list";
import { publicProcedure, router } from "../init";
import { trackedEvents } from "../tracked-events";

const runInput = z.object({ runId: z.uuid() });
const stepInput = z.object({ runId: z.uuid(), stepId: z.string() });

export const runsRouter = router({
  get: publicProcedure
    .input(z.object({ runId: z.uuid() }))
    .query(({ ctx, input }) => getRun(ctx.app.db.prisma, input.runId)),

  listForPlan: publicProcedure
    .input(z.object({ planId: z.string() }))
    .query(({ ctx, input }) => listRuns(ctx.app.db.prisma, input.planId)),

  /**
   * Every event of a run after `lastEventId`, replayed from the table and then live. The client
   * sends the id of the last event it saw when it reconnects, so nothing is missed or repeated.
   */
  events: publicProcedure
    .input(z.object({ runId: z.uuid(), lastEventId: z.string().nullish() }))
    .subscription(({ ctx, input, signal }) => trackedEvents(ctx.app, input.runId, input.lastEventId, signal)),

  decide: publicProcedure
    .input(
      z.object({ runId: z.uuid(), stepId: z.string(), approve: z.boolean(), comment: z.string().max(2000).optional() }),
    )
    .mutation(({ ctx, input }) => decideApproval(ctx.app.engine, { ...input, actor: ctx.actor })),

  /** The answer to an ask_user step; it becomes the step's output. */
  answer: publicProcedure
    .input(z.object({ runId: z.uuid(), stepId: z.string(), answer: z.string().trim().min(1).max(10_000) }))
    .mutation(({ ctx, input }) => answerQuestion(ctx.app.engine, { ...input, actor: ctx.actor })),

  /** A new run from `stepId` on, reusing the other steps' recorded results; optional new arguments. */
  rerunFrom: publicProcedure
    .input(z.object({ runId: z.uuid(), stepId: z.string(), args: z.record(z.string(), z.unknown()).optional() }))
    .mutation(({ ctx, input }) => rerunFrom(ctx.app.engine, ctx.app.db.prisma, { ...input, actor: ctx.actor })),

  /** Retry with new arguments, skip, insert steps before, or abort: applied to a failed step. */
  applyRecovery: publicProcedure
    .input(z.object({ runId: z.uuid(), stepId: z.string(), action: recoveryActionSchema }))
    .mutation(({ ctx, input }) =>
      applyRecoveryAction(ctx.app.engine, ctx.app.db.prisma, { ...input, actor: ctx.actor }),
    ),

  cancel: publicProcedure
    .input(runInput)
    .mutation(({ ctx, input }) => cancelRun(ctx.app.engine, { ...input, actor: ctx.actor })),
  pause: publicProcedure
    .input(runInput)
    .mutation(({ ctx, input }) => pauseRun(ctx.app.engine, { ...input, actor: ctx.actor })),
  resume: publicProcedure
    .input(runInput)
    .mutation(({ ctx, input }) => resumeRun(ctx.app.engine, { ...input, actor: ctx.actor })),
  retryStep: publicProcedure
    .input(stepInput)
    .mutation(({ ctx, input }) => retryStep(ctx.app.engine, { ...input, actor: ctx.actor })),
  skipStep: publicProcedure
    .input(stepInput)
    .mutation(({ ctx, input }) => skipStep(ctx.app.engine, { ...input, actor: ctx.actor })),

  /** Runs across the app or of one plan, newest first, filtered by state, paged by cursor. */
  list: publicProcedure.input(runListInputSchema).query(({ ctx, input }) => listRunSummaries(ctx.app.db.pool, input)),
  /** Stored events of a run (e.g. a step's log lines up to the snapshot), oldest first. */
  history: publicProcedure.input(runEventsInputSchema).query(({ ctx, input }) => readRunEvents(ctx.app.db.pool, input)),
  /** Who approved or denied which gated step. */
  decisions: publicProcedure.input(runInput).query(({ ctx, input }) => listRunDecisions(ctx.app.db.pool, input.runId)),
});
