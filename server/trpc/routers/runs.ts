import { z } from "zod";
import { viaOperation } from "../../operations/operation";
import { runApplyRecovery, runRerunFrom } from "../../operations/steering";
import {
  runAnswer,
  runApproval,
  runCancel,
  runDecide,
  runDecisions,
  runEvents,
  runGet,
  runList,
  runListForPlan,
  runPause,
  runResume,
  runRetryStep,
  runSkipStep,
} from "../../operations/runs";
import { authorizedBy, operationProcedure, router, stillAuthorized } from "../init";
import { decisionLinkCreate } from "../../operations/decision-links";
import { trackedEvents } from "../tracked-events";

export const runsRouter = router({
  get: operationProcedure(runGet).query(viaOperation(runGet)),

  /** What approving a waiting step would let run, computed on the server (shown next to Approve). */
  approval: operationProcedure(runApproval).query(viaOperation(runApproval)),

  listForPlan: operationProcedure(runListForPlan).query(
    async (call) => (await viaOperation(runListForPlan)(call)).runs,
  ),

  /**
   * Every event of a run after `lastEventId`, replayed from the table and then live. The client
   * sends the id of the last event it saw when it reconnects, so nothing is missed or repeated.
   * Who may subscribe is run.events's to say: the stream is its reads, followed live.
   */
  events: authorizedBy(runEvents)
    .input(z.object({ runId: z.uuid(), lastEventId: z.string().nullish() }))
    .subscription(({ ctx, input, signal }) =>
      trackedEvents(ctx.app, input.runId, input.lastEventId, signal, stillAuthorized(ctx, runEvents)),
    ),

  /** Steering and decisions are operations (server/operations/runs.ts): one place checks who may. */
  decide: operationProcedure(runDecide).mutation(viaOperation(runDecide)),
  /** A signed, single-use link to decide a waiting step from elsewhere (server/decisions/decision-links.ts). */
  createDecisionLink: operationProcedure(decisionLinkCreate).mutation(viaOperation(decisionLinkCreate)),
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
  list: operationProcedure(runList).query(viaOperation(runList)),
  /** Stored events of a run (e.g. a step's log lines up to the snapshot), oldest first. */
  history: operationProcedure(runEvents).query(viaOperation(runEvents)),
  /** Who approved or denied which gated step. */
  decisions: operationProcedure(runDecisions).query(async (call) => (await viaOperation(runDecisions)(call)).decisions),
});
