"use client";

import { useQuery } from "@tanstack/react-query";
import Link from "next/link";
import { useEffect, useMemo, useRef, useState } from "react";
import type { RunDecision } from "@/server/engine/run-list";
import { UsageSummary } from "@/components/planner/usage-summary";
import { useTRPC } from "@/components/trpc";
import { ErrorMessage } from "@/components/ui/error-message";
import { Tabs } from "@/components/ui/tabs";
import { PendingList } from "./pending-list";
import { RunEvents } from "./run-events";
import { RunGraph } from "./run-graph";
import { RunPanel } from "./run-panel";
import { isFinished, waitingSteps, type LiveRun } from "./run-state";
import { RunStepList } from "./run-step-list";
import { RunTimeline } from "./run-timeline";
import { SessionPanel } from "./session-panel";
import { useLiveRun } from "./use-live-run";
import { useWaitNotifications } from "./wait-notifications";
import "./runs.css";

const TABS = [
  { id: "steps", label: "Steps" },
  { id: "graph", label: "Graph" },
  { id: "timeline", label: "Timeline" },
  { id: "events", label: "Events" },
];

/** The live view of one run: header, what waits for a person, and the steps as a list, graph, timeline and event log. */
export function RunPage({ runId }: { runId: string }) {
  const trpc = useTRPC();
  const live = useLiveRun(runId);
  const run = live.run;
  const plan = useQuery({
    ...trpc.plans.get.queryOptions({ planId: run?.planId ?? "", version: run?.planVersion }),
    enabled: !!run,
    staleTime: Infinity,
  });
  const decisions = useQuery({ ...trpc.runs.decisions.queryOptions({ runId }), staleTime: Infinity });
  const [tab, setTab] = useState("steps");
  useRenderProbe(run);

  const version = plan.data?.plan;
  const stepsById = useMemo(() => new Map((version?.steps ?? []).map((step) => [step.id, step])), [version]);
  const decisionByStep = useMemo(
    () => new Map<string, RunDecision>((decisions.data ?? []).map((decision) => [decision.stepId, decision])),
    [decisions.data],
  );
  const waiting = useMemo(() => (run ? waitingSteps(run) : []), [run]);
  useWaitNotifications(runId, version?.goal ?? "", run && version ? waiting : undefined, stepsById);

  if (live.error && !run) return <ErrorMessage error={live.error} />;
  if (!run || plan.isPending) return <p aria-busy="true">Loading run…</p>;
  if (plan.error) return <ErrorMessage error={plan.error} />;
  const steerable = !(run.status === "completed" || run.status === "cancelled");

  return (
    <section className="stack run-page" data-run-id={run.id}>
      <p className="muted">
        <Link href={`/plans/${version!.id}`}>← {version!.goal}</Link> · <Link href="/runs">All runs</Link>
      </p>
      <RunPanel run={run} goal={version!.goal} connection={live.connection} />
      {live.error && <ErrorMessage error={live.error} />}
      <SessionPanel runId={run.id} signalSeq={run.signalSeq} />
      <PendingList runId={run.id} waiting={waiting} steps={stepsById} title={version!.goal} steerable={steerable} />
      {isFinished(run.status) && waiting.length === 0 && run.status !== "completed" && (
        <p className="muted" data-testid="run-outcome">
          {runOutcome(run)}
        </p>
      )}
      {run.eventsRemovedAt && (
        <p className="muted" data-testid="events-removed">
          This run&apos;s events and step logs were removed by retention on{" "}
          {new Date(run.eventsRemovedAt).toLocaleDateString()}, as this server keeps them only for a while after a run
          finishes. Its steps&apos; outcomes and results, and the audit log, are kept.
        </p>
      )}
      <Tabs tabs={TABS} selected={tab} onSelect={setTab} label="Run views">
        {tab === "steps" && (
          <RunStepList steps={version!.steps} run={run} decisionByStep={decisionByStep} steerable={steerable} />
        )}
        {tab === "graph" && <RunGraph steps={version!.steps} states={run.steps} />}
        {tab === "timeline" && <RunTimeline run={run} steps={version!.steps} />}
        {tab === "events" && <RunEvents run={run} />}
      </Tabs>
      <UsageSummary scope={{ runId }} label="Planner usage in this run" />
    </section>
  );
}

/** One sentence on how a run that did not complete ended, and what the person can still do. */
function runOutcome(run: LiveRun): string {
  if (run.status === "cancelled") return "This run was cancelled. Nothing waits for you.";
  const failed = run.steps.filter((step) => step.status === "failed").length;
  const steps = failed === 1 ? "1 step" : `${failed} steps`;
  return `This run failed: ${steps} failed. Retry or skip a failed step to go on, or re-run from any step.`;
}

declare global {
  interface Window {
    /** Set by bench/live-view.ts: the page records when each event was rendered. */
    __stepwiseRenderProbe?: { seq: number; createdAt: string; renderedAt: number }[];
  }
}

/** For measurement only: after each commit, notes when every newly applied event reached the page. */
function useRenderProbe(run: LiveRun | undefined) {
  const rendered = useRef(0);
  useEffect(() => {
    const probe = window.__stepwiseRenderProbe;
    if (!probe || !run) return;
    const renderedAt = Date.now();
    const fresh = run.eventCount - rendered.current;
    if (fresh <= 0) return;
    for (let i = run.eventCount - fresh; i < run.eventCount; i++) {
      const event = run.events[i]!;
      probe.push({ seq: event.seq, createdAt: event.createdAt, renderedAt });
    }
    rendered.current = run.eventCount;
  }, [run]);
}
