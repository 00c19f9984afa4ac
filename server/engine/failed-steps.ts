import { inTransaction } from "../db";
import { AppError } from "../errors";
import type { EngineDeps } from "./deps";
import { requireRun, type RunTransaction } from "./run-transaction";

/*
 * What every intervention on a failed step shares — a person's retry and skip (commands.ts) and an
 * applied recovery proposal (plan-versions.ts): the run transaction opened on the failed step, and
 * the run put back to work.
 */

/** A person's intervention on a failed run puts it back to work. */
export function reopenRun(tx: RunTransaction, reason: string): void {
  if (tx.run.status !== "failed" && tx.run.status !== "failing") return;
  tx.run.status = "running";
  tx.events.push({ type: "run.running", data: { status: "running", reason } });
}

/** Opens a run transaction on a failed step of a run that can still be steered. */
export async function onFailedStep(
  deps: EngineDeps,
  input: { runId: string; stepId: string },
  verb: string,
  apply: (tx: RunTransaction) => Promise<void>,
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    await tx.loadStatuses([input.stepId]);
    const status = tx.statuses.get(input.stepId);
    if (status !== "failed") {
      throw new AppError(
        "invalid_state",
        `Only a failed step can be ${verb}; ${input.stepId} is ${status ?? "unknown"}`,
      );
    }
    if (tx.run.status === "cancelled") throw new AppError("invalid_state", "The run was cancelled");
    await apply(tx);
    await tx.flush();
  });
}
