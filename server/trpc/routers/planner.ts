import type { describePlannerConfig } from "../../planner/config";
import type { listRecoveryProposals } from "../../planner/recovery-proposals";
import type { getPlanningSession, listPlanningSessions } from "../../planner/sessions";
import type { getUsage } from "../../planner/usage";
import type { describeSandbox } from "../../tools/sandbox";
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
  options: operationProcedure(plannerOptions).query(
    async (call) =>
      (await viaOperation(plannerOptions)(call)) as unknown as {
        config: ReturnType<typeof describePlannerConfig>;
        defaultWorkspace: string;
        sandbox: ReturnType<typeof describeSandbox>;
        workspaces: { id: string; name: string; path: string; isDefault: boolean }[];
      },
  ),

  start: operationProcedure(plannerStart).mutation(viaOperation(plannerStart)),

  /** Seed 002's `/plan [task]`, `/plan status`, `/plan cancel`. */
  command: operationProcedure(planningCommand).mutation(viaOperation(planningCommand)),
  /** Seed 002: a message while the planner gathers joins its context. */
  message: operationProcedure(planningMessage).mutation(viaOperation(planningMessage)),

  session: operationProcedure(plannerSession).query(
    async (call) =>
      (await viaOperation(plannerSession)(call)) as unknown as Awaited<ReturnType<typeof getPlanningSession>>,
  ),

  sessions: operationProcedure(plannerSessions).query(
    async (call) =>
      (await viaOperation(plannerSessions)(call)) as unknown as Awaited<ReturnType<typeof listPlanningSessions>>,
  ),

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

  usage: operationProcedure(plannerUsage).query(
    async (call) => (await viaOperation(plannerUsage)(call)) as unknown as Awaited<ReturnType<typeof getUsage>>,
  ),

  proposeRecovery: operationProcedure(recoveryPropose).mutation(viaOperation(recoveryPropose)),

  recoveryProposals: operationProcedure(recoveryProposals).query(
    async (call) =>
      (await viaOperation(recoveryProposals)(call)) as unknown as Awaited<ReturnType<typeof listRecoveryProposals>>,
  ),

  decideRecovery: operationProcedure(recoveryDecide).mutation(viaOperation(recoveryDecide)),
});
