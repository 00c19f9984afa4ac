import { viaOperation } from "../../operations/operation";
import { agentSessionList, agentSessionOfRun, type SessionOfRunView } from "../../operations/reads";
import { signalClear } from "../../operations/steering";
import { agentSetConcurrency } from "../../operations/agent";
import { operationProcedure, router } from "../init";

/** What the browser needs of agent sessions: the session behind a run, its signals, and clearing one. */
export const agentsRouter = router({
  list: operationProcedure(agentSessionList).query(viaOperation(agentSessionList)),

  sessionOfRun: operationProcedure(agentSessionOfRun).query(
    async (call) => ((await viaOperation(agentSessionOfRun)(call)) as { session: SessionOfRunView }).session,
  ),

  /** A person clears a signal (a blocker the agent raised, a failed check they decided to accept). */
  clearSignal: operationProcedure(signalClear).mutation(viaOperation(signalClear)),

  /** A person sets how many agent tasks of the session may be in progress at once. */
  setConcurrency: operationProcedure(agentSetConcurrency).mutation(viaOperation(agentSetConcurrency)),
});
