import { AGENT_TASK_TOOL } from "../tools/agent-task";
import type { Step, StepInput } from "../plan-schema";
import { DONE_STEP_STATUSES, isIn } from "../vocabulary";
import type { NewTask } from "./contract";

/**
 * Seed 003 lets an agent change an existing task, not only its status: `update_tasks` items may
 * carry the task's other fields (title, type, description, hints, paths, dependencies, acceptance,
 * verifiers). Without it an agent working only through the CLI cannot correct a task it wrote. An
 * edited task is checked by the same gates as an added one (`checkNewTasks`, then the plan's own
 * checks when the version is saved), and what it edits is the task as the plan holds it now.
 */
export const TASK_FIELDS = [
  "title",
  "type",
  "description",
  "dependencies",
  "context_hints",
  "relevant_file_paths",
  "acceptance",
  "verify",
] as const;

export type TaskFieldEdit = Partial<Pick<NewTask, (typeof TASK_FIELDS)[number]>>;

/** The fields an `update_tasks` item changes, or null when it only reports a status or notes. */
export function fieldEditOf(update: Record<string, unknown>): TaskFieldEdit | null {
  const edit: Record<string, unknown> = {};
  for (const field of TASK_FIELDS) if (update[field] !== undefined) edit[field] = update[field];
  return Object.keys(edit).length > 0 ? (edit as TaskFieldEdit) : null;
}

/** A task of the plan as `add_tasks` would have described it, so the same gates can judge it. */
export function taskOfStep(step: Step): NewTask {
  const args = step.args as { acceptance?: string[]; verify?: string[] };
  return {
    title: step.title ?? "",
    ...(step.type && { type: step.type }),
    description: step.description,
    dependencies: step.dependsOn.flatMap((id) => {
      const number = /^step_(\d+)$/.exec(id)?.[1];
      return number ? [Number(number)] : [];
    }),
    context_hints: step.contextHints,
    relevant_file_paths: step.relevantFilePaths,
    ...(args.acceptance && { acceptance: args.acceptance }),
    ...(args.verify && { verify: args.verify }),
  };
}

/** The step with the agent's edit applied: every field it names replaced, the rest kept. */
export function applyTaskEdit(step: Step, edit: TaskFieldEdit): StepInput {
  const args = { ...(step.args as Record<string, unknown>) };
  if (edit.acceptance !== undefined) args.acceptance = edit.acceptance.map((line) => line.trim()).filter(Boolean);
  if (edit.verify !== undefined) args.verify = edit.verify.filter((command) => command.trim());
  for (const key of ["acceptance", "verify"]) {
    if (Array.isArray(args[key]) && (args[key] as unknown[]).length === 0) delete args[key];
  }
  return {
    ...step,
    args,
    ...(edit.title !== undefined && { title: edit.title.trim() }),
    ...(edit.type !== undefined && { type: edit.type as StepInput["type"] }),
    ...(edit.description !== undefined && { description: edit.description }),
    ...(edit.dependencies !== undefined && { dependsOn: edit.dependencies.map((id) => `step_${id}`) }),
    ...(edit.context_hints !== undefined && { contextHints: edit.context_hints }),
    ...(edit.relevant_file_paths !== undefined && { relevantFilePaths: edit.relevant_file_paths }),
    ...(edit.acceptance !== undefined && { acceptance: args.acceptance as string[] | undefined }),
  };
}

/**
 * Why a task may not be edited, or null. Only an agent's own tasks (never a tool step a person
 * added), and only while nobody has finished them: a settled task's definition is history.
 */
export function refuseTaskEdit(step: Step | undefined, taskId: number, state: string): string | null {
  if (!step) return `There is no task ${taskId} in this plan.`;
  if (step.tool !== AGENT_TASK_TOOL)
    return `Task ${taskId} is a tool step, not an agent's task: only a person edits it.`;
  if (isIn(DONE_STEP_STATUSES, state) || state === "failed")
    return `Task ${taskId} is settled (${state}); add a new task instead of editing it.`;
  return null;
}
