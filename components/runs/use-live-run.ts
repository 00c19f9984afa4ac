"use client";

import { useQuery } from "@tanstack/react-query";
import { useSubscription } from "@trpc/tanstack-react-query";
import { useEffect, useState } from "react";
import { useTRPC } from "@/components/trpc";
import { applyEvent, fromSnapshot, type LiveRun } from "./run-state";

/**
 * Loads a run's snapshot once, then follows its event stream from the snapshot's last sequence
 * number. The subscription link resumes from the last event id by itself after a drop.
 */
export function useLiveRun(runId: string | undefined) {
  const trpc = useTRPC();
  const snapshot = useQuery({
    ...trpc.runs.get.queryOptions({ runId: runId ?? "" }),
    enabled: !!runId,
    staleTime: Infinity,
  });
  const [run, setRun] = useState<LiveRun | undefined>();

  useEffect(() => {
    if (snapshot.data) setRun(fromSnapshot(snapshot.data));
  }, [snapshot.data]);

  const finished = run && ["completed", "failed", "cancelled"].includes(run.status);
  const subscription = useSubscription(
    trpc.runs.events.subscriptionOptions(
      { runId: runId ?? "", lastEventId: snapshot.data ? String(snapshot.data.lastSeq) : null },
      {
        enabled: !!runId && !!snapshot.data && !finished,
        onData: (tracked) => setRun((current) => (current ? applyEvent(current, tracked.data) : current)),
      },
    ),
  );
  return { run, error: snapshot.error ?? subscription.error, connection: subscription.status };
}
