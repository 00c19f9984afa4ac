import type { RecoveryAction } from "@/server/engine/recovery-action";
import type { EventBody } from "@/server/events/types";

/** One line for a recovery action, as the proposal and its history show it. */
export function describeRecoveryAction(action: RecoveryAction): string {
  switch (action.kind) {
    case "retry":
      return action.args ? "retry with new arguments" : "retry as it is";
    case "skip":
      return "skip the step and continue";
    case "insert_steps":
      return `insert ${action.steps.length} step${action.steps.length === 1 ? "" : "s"}, then retry`;
    case "abort":
      return "abort the run";
  }
}

export function formatTokens(count: number): string {
  return count.toLocaleString("en-US");
}

/** Dollars with enough digits to tell small calls apart; null when the model has no known price. */
export function formatCost(costUsd: number | null | undefined): string {
  if (costUsd === null || costUsd === undefined) return "cost unknown";
  if (costUsd === 0) return "$0";
  return costUsd < 0.01 ? `$${costUsd.toFixed(4)}` : `$${costUsd.toFixed(2)}`;
}

export interface ProgressLine {
  seq: number;
  tone: "info" | "warn" | "error" | "ok";
  text: string;
  details?: string[];
}

/** A planning event as a line of the live progress log. */
export function describePlanningEvent(event: { seq: number } & EventBody): ProgressLine | undefined {
  const line = (tone: ProgressLine["tone"], text: string, details?: string[]): ProgressLine => ({
    seq: event.seq,
    tone,
    text,
    ...(details && { details }),
  });
  switch (event.type) {
    case "planning.started": {
      const { data } = event;
      return line(
        "info",
        `${data.kind === "regenerate" ? "Regenerating" : "Planning"} in ${data.mode} mode with ${data.model}${data.judge ? ", reviewed by a judge" : ""}`,
      );
    }
    case "planning.context":
      return line("info", `Gathering context: ${event.data.message}`);
    case "planning.usage": {
      const { data } = event;
      return line(
        data.ok ? "info" : "warn",
        `Model call (${data.purpose.replace("_", " ")}): ${formatTokens(data.inputTokens)} in / ${formatTokens(data.outputTokens)} out tokens, ${formatCost(data.costUsd)}, ${(data.durationMs / 1000).toFixed(1)} s`,
      );
    }
    case "planning.draft":
      return line("info", `Draft ${event.data.attempt + 1}: ${event.data.steps} steps`);
    case "planning.gates_passed":
      return line("ok", "The draft passed every quality gate");
    case "planning.gates_failed":
      return line("warn", "Quality gates failed; fixing:", event.data.details);
    case "planning.judge":
      return line(
        event.data.approved ? "ok" : "warn",
        `Judge ${event.data.approved ? "approved" : "rejected"}: ${event.data.feedback}`,
      );
    case "planning.refining":
      return line("info", `Refining the plan (refinement ${event.data.attempt})`);
    case "planning.unparsable":
      return line("warn", `The model's answer was not a readable plan; asking again (${event.data.reason})`);
    case "planning.tool_call":
      return event.data.error
        ? line("warn", `Tool call ${event.data.tool} refused: ${event.data.error}`)
        : line("info", `Looked at the workspace: ${event.data.tool} ${JSON.stringify(event.data.args ?? {})}`);
    case "planning.question":
      return line("info", `The planner asks: ${event.data.question}`);
    case "planning.answered":
      return line("info", `Answered: ${event.data.answer}`);
    case "planning.message":
      return line("info", `${event.data.by} added: ${event.data.message}`);
    case "planning.nudge":
      return line("info", "The model answered without a tool; reminded it to use one");
    case "planning.completed":
      return line("ok", `Plan ready (version ${event.data.version})`);
    case "planning.invalid":
      return line("error", "The plan still failed the quality gates; it was not accepted");
    case "planning.failed":
      return line("error", event.data.message);
    case "planning.cancelled":
      return line("warn", "Planning was cancelled");
    case "planning.timed_out":
      return line("warn", event.data.message);
    case "planning.resumed":
      return line("info", `Continuing where it left off (${event.data.phase})`);
    default:
      return undefined;
  }
}
