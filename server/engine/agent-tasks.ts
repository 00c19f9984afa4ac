import { inTransaction } from "../db";
import { AppError } from "../errors";
import type { Step, StepStatus } from "../plan-schema";
import type { StepResult } from "../vocabulary";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { advance } from "./advance";
import type { EngineDeps } from "./deps";
import { adoptVersionIn } from "./plan-versions";
import { audit, requireRun } from "./run-transaction";

/** What an agent may report about its task (seed 003's `update_tasks[].status`). */
export type AgentTaskStatus = "TODO" | "IN_PROGRESS" | "DONE" | "CANCELLED";

export interface AgentTaskUpdate {
  stepId: string;
  status: AgentTaskStatus;
  /** The agent's notes: what it did, or why it hands the task back or drops it. */
  note?: string;
  /** With DONE: a list the task found, recorded in its output for a later step's `forEach`. */
  items?: unknown[];
}

/**
 * Whether `update` may move a step in `status` as asked: "apply", "noop" (already there — an agent
 * repeating itself after a lost answer is not an error), or why not. Pure; used to check a whole
 * `update` before anything is written, and again under the run lock while writing.
 */
export function checkAgentTaskUpdate(
  step: Pick<Step, "id" | "tool" | "dependsOn" | "forEach">,
  status: StepStatus,
  wanted: AgentTaskStatus,
): { kind: "apply" | "noop" } | { kind: "refused"; reason: string } {
  const name = taskName(step.id);
  if (step.tool !== AGENT_TASK_TOOL) {
    return { kind: "refused", reason: `${name} is run by Stepwise (tool ${step.tool}), not by an agent.` };
  }
  // The group settles when its instances do; reporting on it would skip them.
  if (step.forEach !== undefined) {
    return {
      kind: "refused",
      reason: `${name} runs once for each element of ${step.forEach}: report on its instances (\`instance\`), not on the task.`,
    };
  }
  const target: Record<AgentTaskStatus, StepStatus> = {
    TODO: "awaiting_agent",
    IN_PROGRESS: "running",
    DONE: "completed",
    CANCELLED: "skipped",
  };
  if (status === target[wanted]) return { kind: "noop" };
  if (status === "awaiting_agent" && wanted !== "TODO") return { kind: "apply" };
  if (status === "running" && wanted !== "IN_PROGRESS") return { kind: "apply" };
  const why: Partial<Record<StepStatus, string>> = {
    pending: `it waits for its dependencies (${step.dependsOn.map(taskName).join(", ")}) to be done`,
    blocked: "a dependency failed; that has to be fixed first",
    awaiting_approval: "it waits for a person's approval",
    completed: "it is already DONE",
    skipped: "it was cancelled or skipped",
    cancelled: "the run was cancelled",
  };
  return { kind: "refused", reason: `${name} cannot become ${wanted}: ${why[status] ?? `it is ${status}`}.` };
}

/** Seed 003 numbers tasks; a task's number is its step's: `step_7` is task 7. */
function taskName(stepId: string): string {
  const number = /^step_(\d+)$/.exec(stepId)?.[1];
  return number ? `Task ${number}` : `Step ${stepId}`;
}

/**
 * Applies an agent's task updates in one transaction: all of them, or — when one is refused —
 * none. DONE records the agent's note as the step's output, and dependents move on as after any
 * completed step.
 */
export async function updateAgentTasks(
  deps: EngineDeps,
  input: { runId: string; updates: AgentTaskUpdate[]; actor: string; adoptVersion?: number },
): Promise<void> {
  await inTransaction(deps.pool, async (client) => {
    const tx = await requireRun(deps, client, input.runId);
    if (tx.run.status === "cancelled") throw new AppError("invalid_state", "The session's run was cancelled");
    if (input.adoptVersion !== undefined && input.adoptVersion > tx.run.plan_version) {
      await adoptVersionIn(deps, tx, input.adoptVersion, input.actor);
    }
    const rows = await client.query<{ step_id: string; status: StepStatus; started_at: Date | null; attempt: number }>(
      "select step_id, status, started_at, attempt from run_steps where run_id = $1 and step_id = any($2)",
      [tx.run.id, input.updates.map((update) => update.stepId)],
    );
    const byId = new Map(rows.rows.map((row) => [row.step_id, row]));
    const settled: string[] = [];
    for (const update of input.updates) {
      const step = tx.graph.steps.get(update.stepId);
      const row = byId.get(update.stepId);
      if (!step || !row)
        throw new AppError("not_found", `There is no ${taskName(update.stepId).toLowerCase()} in this plan`);
      const check = checkAgentTaskUpdate(step, row.status, update.status);
      if (check.kind === "refused") throw new AppError("invalid_state", check.reason);
      if (check.kind === "noop") continue;
      tx.statuses.set(step.id, row.status);
      const detail = { agent: input.actor, ...(update.note && { note: update.note }) };
      if (update.status === "IN_PROGRESS") {
        row.attempt += 1;
        await client.query(
          "update run_steps set attempt = $3, started_at = now(), progress = 0 where run_id = $1 and step_id = $2",
          [tx.run.id, step.id, row.attempt],
        );
        row.started_at = tx.now;
        tx.setStatus(
          step.id,
          "running",
          undefined,
          { attempt: row.attempt, ...detail },
          {
            kind: "agent",
            agent: input.actor,
            since: tx.now.toISOString(),
          },
        );
      } else if (update.status === "TODO") {
        tx.setStatus(
          step.id,
          "awaiting_agent",
          `Handed back by ${input.actor}${update.note ? `: ${update.note}` : ""}`,
          detail,
          {
            kind: "agent",
          },
        );
      } else if (update.status === "DONE") {
        const result: StepResult = {
          ok: true,
          value: {
            doneBy: input.actor,
            ...(update.note && { note: update.note }),
            ...(update.items && { items: update.items }),
          },
          duration: row.started_at ? tx.now.getTime() - row.started_at.getTime() : 0,
          timestamp: tx.now.toISOString(),
        };
        tx.setResult(step.id, result);
        tx.setStatus(step.id, "completed", undefined, { ...detail, result });
        tx.run.open_steps--;
        settled.push(step.id);
      } else {
        // A task is dropped only from waiting: one in progress is handed back first.
        if (row.status === "running") tx.setStatus(step.id, "awaiting_agent", undefined, detail, { kind: "agent" });
        tx.setStatus(step.id, "skipped", `Cancelled by ${input.actor}${update.note ? `: ${update.note}` : ""}`, detail);
        tx.run.open_steps--;
        settled.push(step.id);
      }
      row.status = tx.statuses.get(step.id)!;
      await audit(
        tx,
        input.actor,
        `task.${update.status.toLowerCase() as Lowercase<AgentTaskStatus>}`,
        step.id,
        detail,
      );
    }
    await advance(tx, settled);
    await tx.flush();
  });
}
