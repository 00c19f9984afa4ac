import { z } from "zod";
import { clearSignal, findSession, listSessions, sessionOfRun } from "../../agents/sessions";
import { requirePerson } from "../../operations/identity";
import { publicProcedure, router } from "../init";

/** What the browser needs of agent sessions: the session behind a run, its signals, and clearing one. */
export const agentsRouter = router({
  list: publicProcedure
    .input(z.object({ limit: z.number().int().min(1).max(200).optional() }).optional())
    .query(({ ctx, input }) => listSessions(ctx.app, input ?? {})),

  sessionOfRun: publicProcedure
    .input(z.object({ runId: z.uuid() }))
    .query(({ ctx, input }) => sessionOfRun(ctx.app, input.runId)),

  /** A person clears a signal (a blocker the agent raised, a failed check they decided to accept). */
  clearSignal: publicProcedure
    .input(z.object({ sessionId: z.string().min(1).max(200), signalId: z.string().min(1).max(100) }))
    .mutation(async ({ ctx, input }) => {
      requirePerson(ctx.identity, "clear a signal in the browser");
      return clearSignal(ctx.app, await findSession(ctx.app, input.sessionId), input.signalId, ctx.actor);
    }),
});
