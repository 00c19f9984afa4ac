import type { StepStatus } from "../plan-schema";
import type { EngineDeps } from "./deps";
import { audit, requireRun, type Client } from "./run-transaction";

/**
 * An agent's lease on a task ran out (it stopped calling): the task goes back to the ready tasks
 * for another agent. A task the agent had started (running) returns to awaiting_agent; one it had
 * only been handed stays there. Either way the run's stream and the audit log say so. Runs in the
 * caller's transaction (`client`), which also deletes the lease, so both happen or neither.
 */
export async function returnExpiredAgentTask(
  deps: EngineDeps,
  client: Client,
  input: { runId: string; stepId: string; agent: string; leasedAt: string },
): Promise<void> {
  const tx = await requireRun(deps, client, input.runId);
  const row = await client.query<{ status: StepStatus }>(
    "select status from run_steps where run_id = $1 and step_id = $2",
    [tx.run.id, input.stepId],
  );
  const status = row.rows[0]?.status;
  const reason = `Lease of ${input.agent} expired, returned to ready`;
  if (status === "running") {
    tx.statuses.set(input.stepId, status);
    tx.setStatus(input.stepId, "awaiting_agent", reason, { agent: input.agent }, { kind: "agent" });
  }
  tx.events.push({
    type: "agent.lease_expired",
    stepId: input.stepId,
    data: { agent: input.agent, leasedAt: input.leasedAt, reason },
  });
  await audit(tx, "stepwise", "task.lease_expired", input.stepId, { agent: input.agent, reason });
  await tx.flush();
}
