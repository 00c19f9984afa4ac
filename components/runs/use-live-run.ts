"use client";

import { useQuery } from "@tanstack/react-query";
import { useSubscription } from "@trpc/tanstack-react-query";
import { useEffect, useState } from "react";
import { useTRPC } from "@/components/trpc";
import type { RunView } from "@/server/engine/run-view";
import { applyEvent, fromSnapshot, type LiveRun } from "./run-state";

/** States after which a run never changes again (a failed run can be reopened by a retry or skip). */
const FINAL = new Set(["completed", "cancelled"]);

/**
 * Loads a run's snapshot once, then follows its event stream from the snapshot's last sequence
 * number. The subscription link resumes from the last tracked event id by itself after a network
 * drop or a server restart, so each event arrives exactly once; the reducer counts any repeat and
 * stops at any gap, and a gap makes this hook start over from a fresh snapshot. Nothing polls.
 */
export function useLiveRun(runId: string) {
  const trpc = useTRPC();
  const snapshot = useQuery({ ...trpc.runs.get.queryOptions({ runId }), staleTime: Infinity });
  const [state, setState] = useState<{ source?: RunView; run?: LiveRun }>({});
  // Derived during render (not in an effect) so the state exists before the stream can deliver.
  if (snapshot.data && state.source !== snapshot.data) {
    setState({ source: snapshot.data, run: fromSnapshot(snapshot.data) });
  }
  const run = state.source === snapshot.data ? state.run : undefined;

  // A missing event, or steps added to the run's plan, make the applied state untrustworthy: start over.
  const resync = !!run?.gap || !!run?.planChanged;
  const { refetch } = snapshot;
  useEffect(() => {
    if (resync) void refetch();
  }, [resync, refetch]);

  const final = run ? FINAL.has(run.status) : snapshot.data ? FINAL.has(snapshot.data.status) : false;
  const subscription = useSubscription(
    trpc.runs.events.subscriptionOptions(
      { runId, lastEventId: snapshot.data ? String(snapshot.data.lastSeq) : null },
      {
        enabled: !!snapshot.data && !final,
        onData: (tracked) =>
          setState((current) => (current.run ? { ...current, run: applyEvent(current.run, tracked.data) } : current)),
      },
    ),
  );
  // A run that is final needs no stream: what the snapshot shows is all there will ever be.
  const connection = final ? "closed" : subscription.status;
  return { run, error: snapshot.error ?? subscription.error, connection };
}
