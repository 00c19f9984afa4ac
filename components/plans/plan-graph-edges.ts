import type { Step } from "@/server/plan-schema";

/** What the plan graph draws for one dependency: a branch (the target has a condition) is dashed and labelled. */
export interface PlanGraphEdge {
  id: string;
  source: string;
  target: string;
  /** The target runs only if its condition holds: the edge is drawn dashed. */
  conditional: boolean;
  /** The condition in words, on the first incoming edge only (one label per branch, not one per edge). */
  label?: string;
}

type EdgeStep = Pick<Step, "id" | "dependsOn" | "when">;

/**
 * The plan graph's edges, from each step's dependencies. A step with `when` gets dashed incoming
 * edges, the first labelled with the condition in words (the server's `conditionWords`, or the
 * condition as written until those are loaded). Pure, so the drawing rules are unit-tested.
 */
export function planGraphEdges(
  steps: readonly EdgeStep[],
  conditionWords: (stepId: string) => string | undefined,
): PlanGraphEdge[] {
  return steps.flatMap((step) =>
    step.dependsOn.map((dep, index) => {
      const edge: PlanGraphEdge = { id: `${dep}->${step.id}`, source: dep, target: step.id, conditional: !!step.when };
      if (step.when && index === 0) edge.label = `if ${conditionWords(step.id) ?? step.when}`;
      return edge;
    }),
  );
}

/** The badge of a fan-out step: what it runs once for each element of. */
export function fanOutBadge(step: Pick<Step, "forEach">): string | undefined {
  return step.forEach ? `× each of ${step.forEach}` : undefined;
}
