import { z } from "zod";
import { getRun, listRuns } from "../../engine/run-view";
import {
  listRunDecisions,
  listRunSummaries,
  readRunEvents,
  runEventsInputSchema,
  runListInputSchema,
} from "../../engine/run-list";
import { viaOperation } from "../../operations/operation";
import { runApplyRecovery, runRerunFrom } from "../../operations/steering";
import { runAnswer, runCancel, runDecide, runPause, runResume, runRetryStep, runSkipStep } from "../../operations/runs";
import { operationProcedure, publicProcedure, router } from "../init";
import { trackedEvents } from "../tracked-events";

const runInput = z.object({ runId: z.uuid() });

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

  /** Steering and decisions are operations (server/operations/runs.ts): one place checks who may. */
  decide: operationProcedure(runDecide).mutation(viaOperation(runDecide)),
  /** The answer to an ask_user step; it becomes the step's output. */
  answer: operationProcedure(runAnswer).mutation(viaOperation(runAnswer)),

  /** A new run from `stepId` on, reusing the other steps' recorded results; optional new arguments. */
  rerunFrom: operationProcedure(runRerunFrom).mutation(viaOperation(runRerunFrom)),

  /** Retry with new arguments, skip, insert steps before, or abort: applied to a failed step. */
  applyRecovery: operationProcedure(runApplyRecovery).mutation(viaOperation(runApplyRecovery)),

  cancel: operationProcedure(runCancel).mutation(viaOperation(runCancel)),
  pause: operationProcedure(runPause).mutation(viaOperation(runPause)),
  resume: operationProcedure(runResume).mutation(viaOperation(runResume)),
  retryStep: operationProcedure(runRetryStep).mutation(viaOperation(runRetryStep)),
  skipStep: operationProcedure(runSkipStep).mutation(viaOperation(runSkipStep)),

  /** Runs across the app or of one plan, newest first, filtered by state, paged by cursor. */
  list: publicProcedure.input(runListInputSchema).query(({ ctx, input }) => listRunSummaries(ctx.app.db.pool, input)),
  /** Stored events of a run (e.g. a step's log lines up to the snapshot), oldest first. */
  history: publicProcedure.input(runEventsInputSchema).query(({ ctx, input }) => readRunEvents(ctx.app.db.pool, input)),
  /** Who approved or denied which gated step. */
  decisions: publicProcedure.input(runInput).query(({ ctx, input }) => listRunDecisions(ctx.app.db.pool, input.runId)),
});
