"use client";

import { useWindowVirtualizer } from "@tanstack/react-virtual";
import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "react";
import type { RunDecision } from "@/server/engine/run-list";
import type { Step } from "@/server/plan-schema";
import { RunStepCard } from "./run-step-card";
import { isFinished, type LiveRun } from "./run-state";

/**
 * Runs up to this many steps render every card (the browser's find and printing see them all);
 * longer runs render only the cards near the viewport, so a 1,000-step live view stays smooth.
 */
export const VIRTUALISE_ABOVE = 150;

interface RunStepListProps {
  steps: Step[];
  run: LiveRun;
  decisionByStep: ReadonlyMap<string, RunDecision>;
  steerable: boolean;
  /** Per fan-out step: how many of its instances wait for approval (its card offers the group decision). */
  groupWaiting?: ReadonlyMap<string, number>;
}

/** The run's steps as cards in plan order. Links to `#step-<id>` reach every step, rendered or not. */
export function RunStepList(props: RunStepListProps) {
  const { steps, run } = props;
  const shown = useMemo(() => withInstanceCards(steps, run.steps), [steps, run.steps]);
  const groupWaiting = useMemo(() => waitingPerGroup(run.steps), [run.steps]);
  const withInstances = { ...props, steps: shown, groupWaiting };
  return withInstances.steps.length > VIRTUALISE_ABOVE ? (
    <VirtualStepList {...withInstances} />
  ) : (
    <FullStepList {...withInstances} />
  );
}

/**
 * A fan-out step's instances are steps of the run (`step_3[0]`, …), each with its own live card,
 * right after their template's: its definition, titled with the instance's element.
 */
function withInstanceCards(steps: Step[], states: LiveRun["steps"]): Step[] {
  const groups = new Map<string, { stepId: string; item: unknown }[]>();
  for (const state of states) {
    if (state.group === undefined) continue;
    const group = groups.get(state.group) ?? [];
    group.push({ stepId: state.stepId, item: state.item });
    groups.set(state.group, group);
  }
  if (groups.size === 0) return steps;
  return steps.flatMap((step) => [
    step,
    ...(groups.get(step.id) ?? []).map((instance) => ({
      ...step,
      id: instance.stepId,
      title: `${step.title ?? step.description} — ${JSON.stringify(instance.item)?.slice(0, 80)}`,
      forEach: undefined,
    })),
  ]);
}

function waitingPerGroup(states: LiveRun["steps"]): ReadonlyMap<string, number> {
  const waiting = new Map<string, number>();
  for (const state of states) {
    if (state.group !== undefined && state.status === "awaiting_approval") {
      waiting.set(state.group, (waiting.get(state.group) ?? 0) + 1);
    }
  }
  return waiting;
}

function FullStepList({ steps, run, decisionByStep, steerable, groupWaiting }: RunStepListProps) {
  // Cards appear after the run loads, so a URL's #step-… had nothing to land on at first.
  useJumpToStep(steps, () => {});
  return (
    <ol className="steps" aria-label="Steps">
      {steps.map((step) => (
        <RunStepCard key={step.id} {...cardProps(step, run, decisionByStep, steerable, groupWaiting)} />
      ))}
    </ol>
  );
}

function VirtualStepList({ steps, run, decisionByStep, steerable, groupWaiting }: RunStepListProps) {
  const boxRef = useRef<HTMLDivElement>(null);
  const [scrollMargin, setScrollMargin] = useState(0);
  useLayoutEffect(() => {
    const box = boxRef.current;
    if (!box) return;
    const measure = () => setScrollMargin(box.getBoundingClientRect().top + window.scrollY);
    measure();
    // Content above the list (what waits for the person, the outcome line) grows and shrinks live.
    const observer = new ResizeObserver(measure);
    observer.observe(document.body);
    return () => observer.disconnect();
  }, []);

  const virtualizer = useWindowVirtualizer({
    count: steps.length,
    estimateSize: () => 96,
    overscan: 8,
    scrollMargin,
    getItemKey: (index) => steps[index]!.id,
  });
  useJumpToStep(steps, (index) => virtualizer.scrollToIndex(index, { align: "start" }));

  const items = virtualizer.getVirtualItems();
  const offset = (items[0]?.start ?? scrollMargin) - scrollMargin;
  return (
    <div ref={boxRef} style={{ height: virtualizer.getTotalSize(), position: "relative" }}>
      {/* One translated list rather than absolutely placed rows keeps the cards' own spacing. */}
      <ol
        className="steps"
        aria-label="Steps"
        data-virtual-count={steps.length}
        style={{ transform: `translateY(${offset}px)` }}
      >
        {items.map((item) => (
          <RunStepCard
            key={item.key}
            {...cardProps(steps[item.index]!, run, decisionByStep, steerable, groupWaiting)}
            index={item.index}
            setSize={steps.length}
            measureRef={virtualizer.measureElement}
          />
        ))}
      </ol>
    </div>
  );
}

function cardProps(
  step: Step,
  run: LiveRun,
  decisionByStep: ReadonlyMap<string, RunDecision>,
  steerable: boolean,
  groupWaiting?: ReadonlyMap<string, number>,
) {
  return {
    step,
    groupWaiting: groupWaiting?.get(step.id) ?? 0,
    state: run.steps[run.stepIndex.get(step.id) ?? -1],
    runId: run.id,
    snapshotSeq: run.snapshotSeq,
    storedDecision: decisionByStep.get(step.id),
    steerable,
    rerunnable: isFinished(run.status),
  };
}

/**
 * A `#step-<id>` link (from "Waiting for you", the graph, or a pasted URL) whose card is not
 * rendered: scroll its row into view, then let the browser land on the card and focus it.
 */
function useJumpToStep(steps: Step[], scrollToIndex: (index: number) => void) {
  const latest = useRef({ steps, scrollToIndex });
  latest.current = { steps, scrollToIndex };
  useEffect(() => {
    const jump = () => {
      const id = decodeURIComponent(window.location.hash.replace(/^#step-/, ""));
      if (!window.location.hash.startsWith("#step-")) return;
      const index = latest.current.steps.findIndex((step) => step.id === id);
      if (index < 0) return;
      latest.current.scrollToIndex(index);
      // The card mounts on the next frames; then align it and move focus to it. For a moment after,
      // keep it there: cards measured near it and the live content above the list (a running run
      // changes both) shift it, or unmount it, after the first alignment. A person's own scrolling
      // ends that at once.
      let frames = 0;
      let focused = false;
      let cancelled = false;
      const stop = () => (cancelled = true);
      const stopOn = ["wheel", "touchstart", "keydown", "mousedown"] as const;
      for (const type of stopOn) window.addEventListener(type, stop, { once: true, passive: true });
      const land = () => {
        if (!cancelled) {
          const card = document.getElementById(`step-${id}`);
          if (!card) {
            latest.current.scrollToIndex(index);
          } else {
            if (Math.abs(card.getBoundingClientRect().top) > 2) card.scrollIntoView({ block: "start" });
            if (!focused) card.focus({ preventScroll: true });
            focused = true;
          }
        }
        if (!cancelled && ++frames < 60) requestAnimationFrame(land);
        else for (const type of stopOn) window.removeEventListener(type, stop);
      };
      requestAnimationFrame(land);
    };
    jump();
    window.addEventListener("hashchange", jump);
    return () => window.removeEventListener("hashchange", jump);
  }, []);
}
