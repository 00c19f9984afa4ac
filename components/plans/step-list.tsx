"use client";

import {
  closestCenter,
  DndContext,
  KeyboardSensor,
  PointerSensor,
  useSensor,
  useSensors,
  type Announcements,
  type CancelDrop,
  type DragEndEvent,
} from "@dnd-kit/core";
import { SortableContext, sortableKeyboardCoordinates, verticalListSortingStrategy } from "@dnd-kit/sortable";
import { useMemo, useRef, useState, type ReactNode } from "react";
import type { Step } from "@/server/plan-schema";
import type { PlanIssue } from "@/server/plan-schema";
import { StepThreadsProvider } from "./comments";
import { checkMove } from "./plan-rules";
import type { StepAssessment } from "@/server/tools/assessment";
import { StepAssessmentsContext, StepCard, type StepActions } from "./step-card";

interface StepListProps {
  planId: string;
  version: number;
  steps: Step[];
  /** Risk and capability per step, computed on the server from the tool and the command. */
  assessments: Record<string, StepAssessment>;
  issuesByStep: Map<string, PlanIssue[]>;
  actions: StepActions;
  editingStepId: string | null;
  renderEditor(step: Step): ReactNode;
  /** Called for a drop the reorder rule accepts. */
  onMove(stepId: string, toIndex: number): void;
  /** Called for a drop the rule refuses; the list keeps its order (the card snaps back). */
  onRefusedMove(reason: string): void;
}

const NO_ISSUES: PlanIssue[] = [];

/**
 * The steps in execution-reading order, reorderable by pointer and keyboard (focus a card's
 * handle, Space to lift, arrows to move, Space to drop, Escape to cancel). The same reorder rule
 * as the server decides each drop before it is sent; screen readers hear the outcome.
 */
export function StepList({
  planId,
  version,
  steps,
  assessments,
  issuesByStep,
  actions,
  editingStepId,
  renderEditor,
  onMove,
  onRefusedMove,
}: StepListProps) {
  const sensors = useSensors(
    // A small distance keeps clicks on the handle from starting a drag.
    useSensor(PointerSensor, { activationConstraint: { distance: 4 } }),
    useSensor(KeyboardSensor, { coordinateGetter: sortableKeyboardCoordinates }),
  );
  const { shown, ids, setDropped } = useShownOrder(steps);
  const dependents = useDependents(steps);
  const announcements = useMoveAnnouncements(steps, ids);

  /**
   * Decides a drop before dnd-kit ends the drag: a refused drop is cancelled (the card snaps back),
   * an accepted one is sent at once, and the drag ends a moment later, after the request has left.
   */
  const cancelDrop: CancelDrop = ({ active, over }) => {
    if (!over || active.id === over.id) return false;
    const check = checkMove(steps, String(active.id), ids.indexOf(String(over.id)));
    if (!check.ok) {
      onRefusedMove(check.reason);
      return true;
    }
    const ended = new Promise<boolean>((resolve) => setTimeout(() => resolve(false)));
    onMove(String(active.id), ids.indexOf(String(over.id)));
    return ended;
  };

  function dragEnd({ active, over }: DragEndEvent) {
    if (!over || active.id === over.id) return;
    const check = checkMove(steps, String(active.id), ids.indexOf(String(over.id)));
    if (check.ok) setDropped({ basedOn: steps, order: check.order });
  }

  return (
    <DndContext
      sensors={sensors}
      collisionDetection={closestCenter}
      cancelDrop={cancelDrop}
      onDragEnd={dragEnd}
      accessibility={{
        announcements,
        screenReaderInstructions: {
          draggable:
            "To move a step, press Space or Enter, use the arrow keys to choose its new place, and press Space or Enter again to drop it, or Escape to cancel. A step cannot move above a step it depends on or below a step that depends on it.",
        },
      }}
    >
      <SortableContext items={ids} strategy={verticalListSortingStrategy}>
        <StepAssessmentsContext value={assessments}>
          <StepThreadsProvider planId={planId}>
            <ol className="steps" aria-label="Steps">
              {shown.map((step) => (
                <StepCard
                  key={step.id}
                  step={step}
                  issues={issuesByStep.get(step.id) ?? NO_ISSUES}
                  dependents={dependents.get(step.id) ?? NO_DEPENDENTS}
                  actions={actions}
                  planId={planId}
                  version={version}
                  editor={editingStepId === step.id ? renderEditor(step) : undefined}
                  disabled={false}
                />
              ))}
            </ol>
          </StepThreadsProvider>
        </StepAssessmentsContext>
      </SortableContext>
    </DndContext>
  );
}

const NO_DEPENDENTS: string[] = [];

/**
 * The order to show: the steps as given, or the order of a drop just made on them.
 * A drop shows its new order in the same render that ends the drag (no flash of the old order);
 * the plan data catches up a moment later and then wins, whether accepted or rolled back.
 */
function useShownOrder(steps: Step[]) {
  const [dropped, setDropped] = useState<{ basedOn: Step[]; order: string[] } | null>(null);
  const shown = useMemo(() => {
    if (!dropped || dropped.basedOn !== steps) return steps;
    const byId = new Map(steps.map((step) => [step.id, step]));
    return dropped.order.map((id) => byId.get(id)!);
  }, [dropped, steps]);
  const previousIds = useRef<string[]>([]);
  const ids = useMemo(() => {
    const next = shown.map((step) => step.id);
    // The same order keeps the same array, so sortable cards do not all re-render for nothing.
    const previous = previousIds.current;
    if (previous.length === next.length && previous.every((id, i) => id === next[i])) return previous;
    previousIds.current = next;
    return next;
  }, [shown]);
  return { shown, ids, setDropped };
}

/** Which steps depend on each step. */
function useDependents(steps: Step[]) {
  // Arrays equal to the previous ones are reused, so memoised cards see unchanged props.
  const previousDependents = useRef(new Map<string, string[]>());
  const dependents = useMemo(() => {
    const map = new Map<string, string[]>();
    for (const step of steps) for (const dep of step.dependsOn) map.set(dep, [...(map.get(dep) ?? []), step.id]);
    for (const [id, list] of map) {
      const previous = previousDependents.current.get(id);
      if (previous && previous.length === list.length && previous.every((item, i) => item === list[i])) {
        map.set(id, previous);
      }
    }
    previousDependents.current = map;
    return map;
  }, [steps]);
  return dependents;
}

/** What screen readers hear as a step is picked up, moved, dropped or put back. */
function useMoveAnnouncements(steps: Step[], ids: string[]): Announcements {
  const position = (id: unknown) => ids.indexOf(String(id)) + 1;
  // dnd-kit reports the picked-up card as "over" itself at once; that is not news after "Picked up".
  const lastOver = useRef<unknown>(null);
  const announcements: Announcements = {
    onDragStart: ({ active }) => {
      lastOver.current = active.id;
      return `Picked up ${active.id} at position ${position(active.id)} of ${ids.length}.`;
    },
    onDragOver: ({ active, over }) => {
      if ((over?.id ?? null) === lastOver.current) return undefined;
      lastOver.current = over?.id ?? null;
      return over
        ? `${active.id} is over position ${position(over.id)} of ${ids.length}.`
        : `${active.id} is no longer over the list.`;
    },
    onDragEnd: ({ active, over }) => {
      if (!over) return `${active.id} was dropped outside the list and stays at position ${position(active.id)}.`;
      const check = checkMove(steps, String(active.id), position(over.id) - 1);
      return check.ok
        ? `${active.id} was dropped at position ${position(over.id)} of ${ids.length}.`
        : `Move refused. ${check.reason} ${active.id} stays at position ${position(active.id)}.`;
    },
    onDragCancel: ({ active, over }) => {
      const check = over && active.id !== over.id ? checkMove(steps, String(active.id), position(over.id) - 1) : null;
      return check && !check.ok
        ? `Move refused. ${check.reason} ${active.id} stays at position ${position(active.id)}.`
        : `Moving ${active.id} was cancelled; it stays at position ${position(active.id)}.`;
    },
  };
  return announcements;
}
