/**
 * The reorder rule of the review page: a step may move anywhere in the list as long as it stays
 * after every step it depends on and before every step that depends on it. The list order is
 * what a person reads top to bottom; keeping dependencies above dependents keeps it honest.
 */

type OrderedStep = { id: string; dependsOn: readonly string[] };

export type MoveCheck =
  | { ok: true; order: string[] }
  | {
      ok: false;
      /** A sentence for the person who dropped the step. */
      reason: string;
      /** The dependency or dependent the move would jump over. */
      blockedBy: string;
      relation: "dependency" | "dependent";
    };

/**
 * Checks moving `stepId` to `toIndex` (its index in the list after the move, as with
 * `Array.splice`). Returns the new order of step ids, or why the move is refused.
 */
export function checkMove(steps: readonly OrderedStep[], stepId: string, toIndex: number): MoveCheck {
  const from = steps.findIndex((step) => step.id === stepId);
  if (from < 0) throw new RangeError(`No step ${stepId}`);
  if (!Number.isInteger(toIndex) || toIndex < 0 || toIndex >= steps.length) {
    throw new RangeError(`Position ${toIndex} is outside the list of ${steps.length} steps`);
  }
  const order = steps.map((step) => step.id);
  order.splice(from, 1);
  order.splice(toIndex, 0, stepId);
  if (from === toIndex) return { ok: true, order };

  const moved = steps[from]!;
  const dependencies = new Set(moved.dependsOn);
  const dependents = new Set(steps.filter((step) => step.dependsOn.includes(stepId)).map((step) => step.id));
  // Only the steps the move jumps over can end up on the wrong side; report the nearest one.
  if (toIndex < from) {
    for (let index = from - 1; index >= toIndex; index--) {
      const passed = steps[index]!.id;
      if (dependencies.has(passed)) {
        return {
          ok: false,
          blockedBy: passed,
          relation: "dependency",
          reason: `${stepId} cannot move above ${passed}: it depends on ${passed}, which must come first.`,
        };
      }
    }
  } else {
    for (let index = from + 1; index <= toIndex; index++) {
      const passed = steps[index]!.id;
      if (dependents.has(passed)) {
        return {
          ok: false,
          blockedBy: passed,
          relation: "dependent",
          reason: `${stepId} cannot move below ${passed}: ${passed} depends on ${stepId}, which must come first.`,
        };
      }
    }
  }
  return { ok: true, order };
}
