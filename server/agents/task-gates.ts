import { CREATES, isActionableHint, mentionedPaths, pathsToCreate } from "../hint-text";
import { TASK_TYPES, type NewTask } from "./contract";

/**
 * Seed 003 Part 3's quality gates for tasks an agent adds: completeness (title, type, hints,
 * paths), structure (known dependencies, no cycles), validity (the paths exist in the workspace,
 * the hints are actionable). Every failure is reported, each as a sentence that says what to fix,
 * so the agent can correct the whole submission at once. Nothing here writes anything.
 */
export interface GateContext {
  /** Numbers of the tasks already in the plan. */
  existingTaskIds: ReadonlySet<number>;
  /** The number the first new task will get; the others follow in order. */
  firstNewId: number;
  /** Whether a workspace-relative path exists (and stays inside the workspace). */
  fileExists(relativePath: string): Promise<boolean>;
}

/**
 * Every path `checkNewTasks` may ask `fileExists` about for these tasks: the relevant paths not
 * said to be created, and the files the hints name (a hint that creates a file excepted). Looked
 * up in one go where the workspace is (workspace-work.ts, `gateFileCheck`).
 */
export function pathsTheGatesCheck(tasks: NewTask[]): string[] {
  return tasks.flatMap((task) => {
    const hints = (task.context_hints ?? []).filter((hint) => hint.trim());
    const created = pathsToCreate(hints);
    const relevant = (task.relevant_file_paths ?? []).filter(
      (filePath) => filePath.trim() && !created.has(filePath.replace(/^\.\//, "").replace(/\/+$/, "")),
    );
    return [...relevant, ...hints.filter((text) => !CREATES.test(text)).flatMap((hint) => mentionedPaths(hint))];
  });
}

export async function checkNewTasks(tasks: NewTask[], context: GateContext): Promise<string[]> {
  const details: string[] = [];
  const newIds = tasks.map((_, index) => context.firstNewId + index);
  const known = new Set([...context.existingTaskIds, ...newIds]);
  const names = tasks.map((task, index) =>
    task.title?.trim() ? `Task '${task.title.trim()}'` : `Task #${index + 1} of add_tasks`,
  );

  for (const [index, task] of tasks.entries()) {
    const name = names[index]!;
    if (!task.title?.trim()) details.push(`${name} has no \`title\`: say in a sentence what the task achieves.`);
    if (!task.type) {
      details.push(`${name} is missing the \`type\` field (one of ${TASK_TYPES.join(", ")}).`);
    } else if (!(TASK_TYPES as readonly string[]).includes(task.type)) {
      details.push(`${name} has an unknown \`type\` '${task.type}'; use one of ${TASK_TYPES.join(", ")}.`);
    }
    const hints = (task.context_hints ?? []).filter((hint) => hint.trim());
    if (hints.length === 0) {
      details.push(
        `${name} is missing the \`context_hints\` field: add short instructions such as "Read \`spec.md\` section 2".`,
      );
    }
    for (const hint of hints) {
      if (!isActionableHint(hint)) {
        details.push(
          `${name} has a hint that is not actionable: "${hint}". Start it with a verb (Read, Edit, Run…) or point at a file or section.`,
        );
      }
    }
    // Acceptance checks (issue "Parallel agent work"): each criterion says something, each verifier
    // is a command Stepwise can run in the task's worktree.
    if ((task.acceptance ?? []).some((criterion) => !criterion.trim())) {
      details.push(`${name} has an empty \`acceptance\` criterion: say what must be true when the task is done.`);
    }
    if ((task.verify ?? []).some((command) => !command.trim())) {
      details.push(
        `${name} has an empty \`verify\` command: give a shell command such as \`npm test -- src/x.test.ts\`.`,
      );
    }
    const paths = (task.relevant_file_paths ?? []).filter((filePath) => filePath.trim());
    if (paths.length === 0) {
      details.push(
        `${name} is missing the \`relevant_file_paths\` field: list the files the task will read or change.`,
      );
    }
    const created = pathsToCreate(hints);
    for (const filePath of paths) {
      if (created.has(filePath.replace(/^\.\//, "").replace(/\/+$/, ""))) continue;
      if (!(await context.fileExists(filePath))) {
        details.push(`${name} lists a non-existent file in \`relevant_file_paths\`: \`${filePath}\`.`);
      }
    }
    // A hint that says to create a file may name one that does not exist yet.
    for (const hint of hints.filter((text) => !CREATES.test(text))) {
      for (const mentioned of mentionedPaths(hint)) {
        if (!(await context.fileExists(mentioned))) {
          details.push(`${name} has a hint pointing to a non-existent file: \`${mentioned}\`.`);
        }
      }
    }
    for (const dependency of task.dependencies) {
      if (!known.has(dependency)) {
        details.push(`${name} depends on task ${dependency}, which does not exist in the plan.`);
      } else if (dependency === newIds[index]) {
        details.push(`${name} depends on itself.`);
      }
    }
  }
  const cycle = findCycle(tasks, newIds);
  if (cycle)
    details.push(
      `The dependencies form a cycle: ${cycle.map((id) => `task ${id}`).join(" → ")}. Tasks must form a DAG.`,
    );
  return details;
}

/**
 * New tasks can only form a cycle among themselves: existing tasks never depend on new ones.
 * A task depending on itself is reported on its own.
 */
function findCycle(tasks: NewTask[], ids: number[]): number[] | undefined {
  const edges = new Map(
    ids.map((id, index) => [id, tasks[index]!.dependencies.filter((dep) => dep !== id && ids.includes(dep))]),
  );
  const state = new Map<number, "visiting" | "done">();
  const stack: number[] = [];
  const visit = (id: number): number[] | undefined => {
    if (state.get(id) === "done") return undefined;
    if (state.get(id) === "visiting") return [...stack.slice(stack.indexOf(id)), id];
    state.set(id, "visiting");
    stack.push(id);
    for (const next of edges.get(id) ?? []) {
      const cycle = visit(next);
      if (cycle) return cycle;
    }
    stack.pop();
    state.set(id, "done");
    return undefined;
  };
  for (const id of ids) {
    const cycle = visit(id);
    if (cycle) return cycle;
  }
  return undefined;
}
