"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useSubscription } from "@trpc/tanstack-react-query";
import { useRouter } from "next/navigation";
import { useState } from "react";
import { useTRPC } from "@/components/trpc";
import { describePlanningEvent, type ProgressLine } from "./planner-format";

/** Events after which the session's stored state (status, questions, result) has changed. */
const REFRESHING = new Set([
  "planning.started",
  "planning.question",
  "planning.answered",
  "planning.message",
  "planning.completed",
  "planning.invalid",
  "planning.failed",
  "planning.cancelled",
  "planning.timed_out",
  "planning.resumed",
  "planning.usage",
]);

const UNSERVED_RECHECK_MS = 10_000;

/** The planning session, its live progress, and cancelling or retrying it. */
export function usePlanningSession(sessionId: string) {
  const trpc = useTRPC();
  const router = useRouter();
  const queryClient = useQueryClient();
  const sessionKey = trpc.planner.session.queryKey({ sessionId });
  // A session queued where no running worker serves its workspace waits for a worker to start
  // elsewhere, which no event of the session tells: while it says so, it is read again now and then.
  const session = useQuery({
    ...trpc.planner.session.queryOptions({ sessionId }),
    refetchInterval: (query) => (query.state.data?.unserved ? UNSERVED_RECHECK_MS : false),
  });
  const [lines, setLines] = useState<ProgressLine[]>([]);
  const subscription = useSubscription(
    trpc.planner.events.subscriptionOptions(
      { sessionId, lastEventId: null },
      {
        enabled: !!session.data,
        onData: (tracked) => {
          const line = describePlanningEvent(tracked.data);
          if (line)
            setLines((current) => (current.some((known) => known.seq === line.seq) ? current : [...current, line]));
          if (REFRESHING.has(tracked.data.type)) void queryClient.invalidateQueries({ queryKey: sessionKey });
          if (tracked.data.type === "planning.usage") {
            void queryClient.invalidateQueries({ queryKey: trpc.planner.usage.pathKey() });
          }
          // A new plan or version exists now: cached plan pages must not show the old one.
          if (tracked.data.type === "planning.completed") {
            void queryClient.invalidateQueries({ queryKey: trpc.plans.pathKey() });
          }
        },
      },
    ),
  );
  const cancel = useMutation(
    trpc.planner.cancel.mutationOptions({ onSettled: () => queryClient.invalidateQueries({ queryKey: sessionKey }) }),
  );
  const retry = useMutation(
    trpc.planner.retry.mutationOptions({ onSuccess: ({ sessionId: next }) => router.push(`/tasks/${next}`) }),
  );

  return { session, lines, subscription, cancel, retry };
}

export type PlanningSessionData = NonNullable<ReturnType<typeof usePlanningSession>["session"]["data"]>;
export type PlanningSubscription = ReturnType<typeof usePlanningSession>["subscription"];
