import type { PlanEdit } from "@/server/plans/edits";
import type { PlanIssue } from "@/server/plan-schema";
import type { Plan, Step } from "@/server/plan-schema";

/**
 * Client-side mirrors of server rules, so the page can answer at once: a refused drop snaps back
 * without a round trip, and an accepted edit shows before the server confirms it. The server
 * stays the authority (server/plans/reorder.ts, server/plans/edits.ts); plan-rules.test.ts checks
 * that the reorder rules agree.
 */

export type PlanView = { plan: Plan; issues: PlanIssue[] };

export type MoveCheck = { ok: true; order: string[] } | { ok: false; reason: string; blockedBy: string };

/** A step must stay below every step it depends on and above every step that depends on it. */
export function checkMove(
  steps: readonly { id: string; dependsOn: readonly string[] }[],
  stepId: string,
  toIndex: number,
): MoveCheck {
  const from = steps.findIndex((step) => step.id === stepId);
  const order = steps.map((step) => step.id);
  if (from < 0 || toIndex < 0 || toIndex >= steps.length)
    return { ok: false, reason: "No such position", blockedBy: "" };
  order.splice(from, 1);
  order.splice(toIndex, 0, stepId);
  const moved = steps[from]!;
  if (toIndex < from) {
    for (let index = from - 1; index >= toIndex; index--) {
      const passed = steps[index]!.id;
      if (moved.dependsOn.includes(passed)) {
        return {
          ok: false,
          blockedBy: passed,
          reason: `${stepId} cannot move above ${passed}: it depends on ${passed}, which must come first.`,
        };
      }
    }
  } else {
    for (let index = from + 1; index <= toIndex; index++) {
      const passed = steps[index]!;
      if (passed.dependsOn.includes(stepId)) {
        return {
          ok: false,
          blockedBy: passed.id,
          reason: `${stepId} cannot move below ${passed.id}: ${passed.id} depends on ${stepId}, which must come first.`,
        };
      }
    }
  }
  return { ok: true, order };
}

/**
 * The plan as it will look once the server accepts `edit`, for edits whose result the client can
 * know; `undefined` for the rest (add, undo, import), which wait for the server.
 */
/** `target` with an edit's changes applied as the server applies them: a null removes the field. */
function withChanges<T extends Record<string, unknown>>(target: T, changes: Record<string, unknown>): T {
  const next: Record<string, unknown> = { ...target };
  for (const [key, value] of Object.entries(changes)) {
    if (value === null) delete next[key];
    else next[key] = value;
  }
  return next as T;
}

export function applyOptimisticEdit(view: PlanView, edit: PlanEdit): PlanView | undefined {
  const plan = view.plan;
  const withSteps = (steps: Step[]): PlanView => ({
    ...view,
    plan: {
      ...plan,
      steps: steps.map((step, index) => (step.order === index + 1 ? step : { ...step, order: index + 1 })),
    },
  });
  switch (edit.kind) {
    case "updatePlan": {
      return { ...view, plan: withChanges(plan, edit.changes) };
    }
    case "updateStep": {
      // A dependency change may reorder steps on the server; wait for it rather than guess.
      if (edit.changes.dependsOn || edit.changes.tool) return undefined;
      return withSteps(
        plan.steps.map((step) => {
          if (step.id !== edit.stepId) return step;
          return withChanges(step, edit.changes);
        }),
      );
    }
    case "moveStep": {
      const check = checkMove(plan.steps, edit.stepId, edit.toIndex);
      if (!check.ok) return undefined;
      const byId = new Map(plan.steps.map((step) => [step.id, step]));
      return withSteps(check.order.map((id) => byId.get(id)!));
    }
    case "deleteStep":
      return withSteps(
        plan.steps
          .filter((step) => step.id !== edit.stepId)
          .map((step) =>
            step.dependsOn.includes(edit.stepId)
              ? { ...step, dependsOn: step.dependsOn.filter((id) => id !== edit.stepId) }
              : step,
          ),
      );
    default:
      return undefined;
  }
}

/** Ids of the steps that depend directly on `stepId`. */
export function dependentsOf(steps: readonly Step[], stepId: string): string[] {
  return steps.filter((step) => step.dependsOn.includes(stepId)).map((step) => step.id);
}

export interface EditRefusal {
  /** `version_conflict`, `invalid_plan`, `invalid_state`, `invalid_input`, … or null for network errors. */
  code: string | null;
  message: string;
  issues: PlanIssue[];
  details: unknown;
}

/** Reads what a refused tRPC call says: code, sentence, and plan issues when there are any. */
export function readRefusal(error: unknown): EditRefusal {
  const data = (error as { data?: { appError?: string | null; details?: unknown; zodIssues?: unknown } } | null)?.data;
  const code = data?.appError ?? null;
  const issues = code === "invalid_plan" && Array.isArray(data?.details) ? (data.details as PlanIssue[]) : [];
  const message =
    error instanceof Error && error.message
      ? error.message
      : "The change could not be saved. Check your connection and try again.";
  return { code, message, issues, details: data?.details ?? null };
}

export function stepLabel(step: Pick<Step, "title" | "description" | "id">): string {
  return step.title || step.description || step.id;
}
