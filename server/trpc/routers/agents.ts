import { z } from "zod";
import { listSessions, sessionOfRun } from "../../agents/sessions";
import { viaOperation } from "../../operations/operation";
import { signalClear } from "../../operations/steering";
import { operationProcedure, publicProcedure, router } from "../init";

/** What the browser needs of agent sessions: the session behind a run, its signals, and clearing one. */
export const agentsRouter = router({
  list: publicProcedure
    .input(z.object({ limit: z.number().int().min(1).max(200).optional() }).optional())
    .query(({ ctx, input }) => listSessions(ctx.app, input ?? {})),

  sessionOfRun: publicProcedure
    .input(z.object({ runId: z.uuid() }))
    .query(({ ctx, input }) => sessionOfRun(ctx.app, input.runId)),

  /** A person clears a signal (a blocker the agent raised, a failed check they decided to accept). */
  clearSignal: operationProcedure(signalClear).mutation(viaOperation(signalClear)),
});
