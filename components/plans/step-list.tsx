"use client";

import {
  closestCenter,
  DndContext,
  KeyboardSensor,
  PointerSensor,
  useSensor,
  useSensors,
  type Announcements,
  type DragEndEvent,
} from "@dnd-kit/core";
import { SortableContext, sortableKeyboardCoordinates, verticalListSortingStrategy } from "@dnd-kit/sortable";
import { useMemo, useRef, type ReactNode } from "react";
import type { Step } from "@/server/plans/schema";
import type { PlanIssue } from "@/server/plans/validate";
import { checkMove } from "./plan-rules";
import { StepCard, type StepActions } from "./step-card";

interface StepListProps {
  steps: Step[];
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
  steps,
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
  const ids = useMemo(() => steps.map((step) => step.id), [steps]);
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

  const position = (id: unknown) => ids.indexOf(String(id)) + 1;
  const announcements: Announcements = {
    onDragStart: ({ active }) => `Picked up ${active.id} at position ${position(active.id)} of ${ids.length}.`,
    onDragOver: ({ active, over }) =>
      over
        ? `${active.id} is over position ${position(over.id)} of ${ids.length}.`
        : `${active.id} is no longer over the list.`,
    onDragEnd: ({ active, over }) => {
      if (!over) return `${active.id} was dropped outside the list and stays at position ${position(active.id)}.`;
      const check = checkMove(steps, String(active.id), position(over.id) - 1);
      return check.ok
        ? `${active.id} was dropped at position ${position(over.id)} of ${ids.length}.`
        : `Move refused. ${check.reason} ${active.id} stays at position ${position(active.id)}.`;
    },
    onDragCancel: ({ active }) => `Moving ${active.id} was cancelled; it stays at position ${position(active.id)}.`,
  };

  function dragEnd({ active, over }: DragEndEvent) {
    if (!over || active.id === over.id) return;
    const toIndex = ids.indexOf(String(over.id));
    const check = checkMove(steps, String(active.id), toIndex);
    if (check.ok) onMove(String(active.id), toIndex);
    else onRefusedMove(check.reason);
  }

  return (
    <DndContext
      sensors={sensors}
      collisionDetection={closestCenter}
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
        <ol className="steps" aria-label="Steps">
          {steps.map((step) => (
            <StepCard
              key={step.id}
              step={step}
              issues={issuesByStep.get(step.id) ?? NO_ISSUES}
              dependents={dependents.get(step.id) ?? NO_DEPENDENTS}
              actions={actions}
              editor={editingStepId === step.id ? renderEditor(step) : undefined}
              disabled={false}
            />
          ))}
        </ol>
      </SortableContext>
    </DndContext>
  );
}

const NO_DEPENDENTS: string[] = [];
