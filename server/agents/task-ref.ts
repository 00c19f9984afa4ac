import { instanceId, parseInstanceId } from "../fan-out-instance";

/**
 * How an agent names a task: seed 003's integer id, plus — for one instance of a fan-out task
 * (`forEach`, each element its own run step `step_3[0]`, …) — the instance's index in the list.
 * The step ids stay the engine's; this is the translation both ways.
 */
export interface TaskRef {
  id: number;
  /** The fan-out instance's index (`$item` is the list's element at it); absent for a plain task. */
  instance?: number;
}

/** The task an agent names by `step_3` or `step_3[1]`; id 0 for a step that is no numbered task. */
export function taskRefOf(stepId: string): TaskRef {
  const parsed = parseInstanceId(stepId);
  const base = parsed?.templateId ?? stepId;
  const id = Number(/^step_(\d+)$/.exec(base)?.[1] ?? 0);
  return parsed ? { id, instance: parsed.index } : { id };
}

/** The run step an agent's `{id, instance}` names. */
export function stepIdOfTask(ref: TaskRef): string {
  return ref.instance === undefined ? `step_${ref.id}` : instanceId(`step_${ref.id}`, ref.instance);
}

/** A task as sentences name it: `3`, or `3[1]` for the second instance of task 3. */
export function taskLabel(stepId: string): string {
  const ref = taskRefOf(stepId);
  return ref.instance === undefined ? String(ref.id) : `${ref.id}[${ref.instance}]`;
}
