import { z } from "zod";
import {
  getPlanningSessionState,
  listPlanningSessionStates,
  planningListInputSchema,
} from "../../planner/session-list";
import { publicProcedure, router } from "../init";

/** The Planning list: every planning session with its state in words (server/planner/session-list.ts). */
export const planningRouter = router({
  list: publicProcedure
    .input(planningListInputSchema)
    .query(({ ctx, input }) => listPlanningSessionStates(ctx.app.db.pool, input)),
  state: publicProcedure
    .input(z.object({ sessionId: z.uuid() }))
    .query(({ ctx, input }) => getPlanningSessionState(ctx.app.db.pool, input.sessionId)),
});
