import type { AgentTaskView, StatusResponse } from "../agents/contract";

/** Readable answers for a person at a terminal; agents use `--json`, which prints the seed's JSON. */
export function printHuman(operation: string, output: unknown): void {
  const out = (line = "") => process.stdout.write(`${line}\n`);
  const value = output as Record<string, unknown>;
  if (operation === "agent.start") {
    out(`Session ${value.session_id} created. ${String(value.message)}`);
    out(`Next: ${String(value.next_command)}`);
    return;
  }
  if (operation === "agent.status") {
    const status = output as StatusResponse;
    out(`Session ${status.session.id}: ${status.now.reason.replaceAll("_", " ")}`);
    if ("current_task" in status.now) {
      out();
      printTask(out, status.now.current_task);
    }
    if ("message" in status.now) out(status.now.message);
    if ("signal" in status) out(`Signal ${status.signal.id} (${status.signal.level}): ${status.signal.message}`);
    if ("plan" in status) {
      out();
      out("Plan:");
      for (const task of status.plan.tasks) {
        out(
          `  ${String(task.id).padStart(3)}  ${task.status.padEnd(11)} ${task.title}${task.executor === "stepwise" ? "  (run by Stepwise)" : ""}`,
        );
      }
    }
    out();
    out(status.now.agent_instructions);
    return;
  }
  if (operation === "agent.suggest") {
    const suggestions = (value.suggestions ?? []) as { title: string; type: string; reason: string }[];
    if (suggestions.length === 0) out("No new suggestions.");
    for (const suggestion of suggestions)
      out(`- [${suggestion.type}] ${suggestion.title}\n    why: ${suggestion.reason}`);
    return;
  }
  out(String(value.message ?? JSON.stringify(output)));
  for (const detail of (value.details ?? []) as string[]) out(`  - ${detail}`);
}

function printTask(out: (line?: string) => void, task: AgentTaskView): void {
  out(`Task ${task.id} [${task.type ?? "task"}] ${task.status}: ${task.title}`);
  if (task.dependencies.length) out(`  after tasks ${task.dependencies.join(", ")}`);
  for (const hint of task.context_hints) out(`  hint: ${hint}`);
  for (const file of task.relevant_file_paths) out(`  file: ${file}`);
}
