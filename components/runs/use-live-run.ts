"use client";

import { useQuery } from "@tanstack/react-query";
import { useSubscription } from "@trpc/tanstack-react-query";
import { useCallback, useEffect, useRef, useState } from "react";
import type { RunView } from "@/server/engine/run-view";
import type { StoredEvent } from "@/server/events/types";
import { useTRPC } from "@/components/trpc";
import { useOnline } from "@/components/ui/use-online";
import { applyEvent, fromSnapshot, type LiveRun } from "./run-state";

/** States after which a run never changes again (a failed run can be reopened by a retry or skip). */
const FINAL = new Set(["completed", "cancelled"]);
/** How often a run showing a step no worker serves is read again (see below). */
const UNSERVED_RECHECK_MS = 10_000;

interface LiveState {
  source?: RunView;
  run?: LiveRun;
  /** Where the current subscription started: the snapshot's sequence, or the last applied one after going offline. */
  resumeFrom?: number;
}

/**
 * Loads a run's snapshot once, then follows its event stream from the snapshot's last sequence
 * number. The subscription link resumes from the last tracked event id by itself after an error
 * or a server restart. When the browser goes offline the stream is closed (an established
 * connection can otherwise hang unnoticed) and reopened from the last applied event when it is
 * back. The reducer counts any repeat and stops at any gap, and a gap makes this hook start over
 * from a fresh snapshot. Nothing polls, except while a step waits for a worker (below).
 */
export function useLiveRun(runId: string) {
  const trpc = useTRPC();
  const snapshot = useQuery({ ...trpc.runs.get.queryOptions({ runId }), staleTime: Infinity });
  const [state, setState] = useState<LiveState>({});
  // Derived during render (not in an effect) so the state exists before the stream can deliver.
  if (snapshot.data && state.source !== snapshot.data) {
    setState({ source: snapshot.data, run: fromSnapshot(snapshot.data), resumeFrom: snapshot.data.lastSeq });
  }
  const run = state.source === snapshot.data ? state.run : undefined;

  const online = useOnline();
  const [seenOnline, setSeenOnline] = useState(online);
  if (online !== seenOnline) {
    // Also during render, so the reopened stream starts from the last applied event, not the snapshot.
    setSeenOnline(online);
    if (online) setState((current) => (current.run ? { ...current, resumeFrom: current.run.lastSeq } : current));
  }

  // A missing event, or steps added to the run's plan, make the applied state untrustworthy: start over.
  const resync = !!run?.gap || !!run?.planChanged;
  const { refetch } = snapshot;
  useEffect(() => {
    if (resync) void refetch();
  }, [resync, refetch]);

  // A step queued for a workspace no running worker serves waits for a worker to start elsewhere,
  // which no event of the run tells: while the snapshot shows one, it is read again now and then,
  // so the words go when a worker serving the workspace starts (its claim's events follow).
  const unserved = !!snapshot.data?.steps.some((step) => step.unserved);
  useEffect(() => {
    if (!unserved) return;
    const timer = setInterval(() => void refetch(), UNSERVED_RECHECK_MS);
    return () => clearInterval(timer);
  }, [unserved, refetch]);

  // Events are applied once per animation frame, however many arrive: a 1,000-step run sends
  // hundreds a second, and one render per event would keep the main thread busy. A hidden tab
  // gets no frames, so it flushes on a timer instead (its title still shows what waits).
  const queue = useRef<StoredEvent[]>([]);
  const cancelFlush = useRef<(() => void) | undefined>(undefined);
  const flush = useCallback(() => {
    cancelFlush.current?.();
    cancelFlush.current = undefined;
    const batch = queue.current;
    queue.current = [];
    if (batch.length === 0) return;
    setState((current) => (current.run ? { ...current, run: batch.reduce(applyEvent, current.run) } : current));
  }, []);
  const enqueue = useCallback(
    (event: StoredEvent) => {
      queue.current.push(event);
      if (cancelFlush.current) return;
      if (document.hidden) {
        const timer = setTimeout(flush, 100);
        cancelFlush.current = () => clearTimeout(timer);
      } else {
        const frame = requestAnimationFrame(flush);
        cancelFlush.current = () => cancelAnimationFrame(frame);
      }
    },
    [flush],
  );
  useEffect(() => {
    // A frame requested just before the tab was hidden would not come until it is shown again.
    const onVisibility = () => {
      if (document.hidden && cancelFlush.current) flush();
    };
    document.addEventListener("visibilitychange", onVisibility);
    return () => {
      document.removeEventListener("visibilitychange", onVisibility);
      cancelFlush.current?.();
    };
  }, [flush]);

  const final = run ? FINAL.has(run.status) : snapshot.data ? FINAL.has(snapshot.data.status) : false;
  const subscription = useSubscription(
    trpc.runs.events.subscriptionOptions(
      { runId, lastEventId: state.resumeFrom === undefined ? null : String(state.resumeFrom) },
      {
        enabled: !!run && !final && online,
        onData: (tracked) => enqueue(tracked.data),
      },
    ),
  );
  // A run that is final needs no stream: what the snapshot shows is all there will ever be.
  const connection = final ? "closed" : !online ? "offline" : subscription.status;
  return { run, error: snapshot.error ?? subscription.error, connection };
}
