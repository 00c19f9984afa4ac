import { z } from "zod";
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
import { viaOperation } from "../../operations/operation";
import { runAnswer, runApproval, runCancel, runDecide, runPause, runResume, runRetryStep, runSkipStep } from "../../operations/runs";
import { decisionLinkCreate } from "../../operations/decision-links";
import { publicProcedure, router } from "../init";
import { trackedEvents } from "../tracked-events";

const runInput = z.object({ runId: z.uuid() });

export const runsRouter = router({
  get: publicProcedure
    .input(z.object({ runId: z.uuid() }))
    .query(({ ctx, input }) => getRun(ctx.app.db.prisma, input.runId, ctx.app.tools)),

  /** What approving a waiting step would let run, computed on the server (shown next to Approve). */
  approval: publicProcedure.input(runApproval.input).query(viaOperation(runApproval)),

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

  /** Steering and decisions are operations (server/operations/runs.ts): one place checks who may. */
  decide: publicProcedure.input(runDecide.input).mutation(viaOperation(runDecide)),
  /** A signed, single-use link to decide a waiting step from elsewhere (server/decisions/decision-links.ts). */
  createDecisionLink: publicProcedure.input(decisionLinkCreate.input).mutation(viaOperation(decisionLinkCreate)),
  /** The answer to an ask_user step; it becomes the step's output. */
  answer: publicProcedure.input(runAnswer.input).mutation(viaOperation(runAnswer)),

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

  cancel: publicProcedure.input(runCancel.input).mutation(viaOperation(runCancel)),
  pause: publicProcedure.input(runPause.input).mutation(viaOperation(runPause)),
  resume: publicProcedure.input(runResume.input).mutation(viaOperation(runResume)),
  retryStep: publicProcedure.input(runRetryStep.input).mutation(viaOperation(runRetryStep)),
  skipStep: publicProcedure.input(runSkipStep.input).mutation(viaOperation(runSkipStep)),

  /** Runs across the app or of one plan, newest first, filtered by state, paged by cursor. */
  list: publicProcedure.input(runListInputSchema).query(({ ctx, input }) => listRunSummaries(ctx.app.db.pool, input)),
  /** Stored events of a run (e.g. a step's log lines up to the snapshot), oldest first. */
  history: publicProcedure.input(runEventsInputSchema).query(({ ctx, input }) => readRunEvents(ctx.app.db.pool, input)),
  /** Who approved or denied which gated step. */
  decisions: publicProcedure.input(runInput).query(({ ctx, input }) => listRunDecisions(ctx.app.db.pool, input.runId)),
});
