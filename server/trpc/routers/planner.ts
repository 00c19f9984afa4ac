import {
  plannerOptions,
  plannerSession,
  plannerSessions,
  plannerUsage,
  plannerEvents,
  recoveryProposals,
} from "../../operations/planner-reads";
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
import { operationProcedure, router, stillAuthorized } from "../init";
import { trackedEvents } from "../tracked-events";

export const plannerRouter = router({
  /** What is configured (never the keys) and which workspaces a task can plan against. */
  options: operationProcedure(plannerOptions).query(viaOperation(plannerOptions)),

  start: operationProcedure(plannerStart).mutation(viaOperation(plannerStart)),

  /** Seed 002's `/plan [task]`, `/plan status`, `/plan cancel`. */
  command: operationProcedure(planningCommand).mutation(viaOperation(planningCommand)),
  /** Seed 002: a message while the planner gathers joins its context. */
  message: operationProcedure(planningMessage).mutation(viaOperation(planningMessage)),

  session: operationProcedure(plannerSession).query(viaOperation(plannerSession)),

  sessions: operationProcedure(plannerSessions).query(viaOperation(plannerSessions)),

  /**
   * The session's progress events after `lastEventId`, replayed then live (like runs.events). The
   * caller is authorised by the `planner.events` operation (its stored part); the live part is
   * the event stream, which only a subscription can carry.
   */
  events: operationProcedure(plannerEvents).subscription(({ ctx, input, signal }) =>
    trackedEvents(ctx.app, input.sessionId, input.lastEventId, signal, stillAuthorized(ctx, plannerEvents)),
  ),

  cancel: operationProcedure(plannerCancel).mutation(viaOperation(plannerCancel)),

  retry: operationProcedure(plannerRetry).mutation(viaOperation(plannerRetry)),

  answer: operationProcedure(plannerAnswer).mutation(viaOperation(plannerAnswer)),

  regenerate: operationProcedure(plannerRegenerate).mutation(viaOperation(plannerRegenerate)),

  suggest: operationProcedure(plannerSuggest).mutation(viaOperation(plannerSuggest)),

  addSuggestion: operationProcedure(plannerAddSuggestion).mutation(viaOperation(plannerAddSuggestion)),

  usage: operationProcedure(plannerUsage).query(viaOperation(plannerUsage)),

  proposeRecovery: operationProcedure(recoveryPropose).mutation(viaOperation(recoveryPropose)),

  recoveryProposals: operationProcedure(recoveryProposals).query(viaOperation(recoveryProposals)),

  decideRecovery: operationProcedure(recoveryDecide).mutation(viaOperation(recoveryDecide)),
});
