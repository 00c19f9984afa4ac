"use client";

import { useQuery, useQueryClient } from "@tanstack/react-query";
import { createTRPCClient, httpLink } from "@trpc/client";
import { useCallback, useMemo, useRef, useState } from "react";
import superjson from "superjson";
import { useTRPC } from "@/components/trpc";
import type { PlanEdit } from "@/server/plans/edits";
import type { AppRouter } from "@/server/trpc/root";
import { applyOptimisticEdit, readRefusal, type EditRefusal, type PlanView } from "./plan-rules";

export type EditOutcome = { ok: true; view: PlanView } | { ok: false; refusal: EditRefusal };

export interface Notice {
  kind: "saved" | "refused" | "conflict";
  message: string;
}

/**
 * Edits go through an unbatched link: the shared client batches on a timer, which lets the
 * re-render that follows a drop (every sortable card) run before the request leaves. Here the
 * request starts within the drop's own event handling.
 */
const editClient = createTRPCClient<AppRouter>({
  links: [httpLink({ url: "/api/trpc", transformer: superjson })],
});

/**
 * The plan under review and the one way to change it. Every edit carries the version it was made
 * on; the page shows the expected result at once and rolls back if the server refuses. Edits are
 * sent one after another, each on the version the previous one produced, so quick successive
 * edits never conflict with each other — only with someone else's.
 */
export function usePlanEditor(planId: string) {
  const trpc = useTRPC();
  const queryClient = useQueryClient();
  const planQuery = useMemo(() => trpc.plans.get.queryOptions({ planId }), [trpc, planId]);
  const plan = useQuery({
    ...planQuery,
    queryFn: async (context) => {
      const view = await planQuery.queryFn!(context);
      // The version's risk assessments are asked for as soon as it arrives, on a request of their
      // own: left to the page, they would leave only after every card of the plan had rendered.
      const { version } = view.plan;
      void queryClient.prefetchQuery({
        ...trpc.plans.assessments.queryOptions({ planId, version }),
        queryFn: () => editClient.plans.assessments.query({ planId, version }),
        staleTime: Infinity,
      });
      return view;
    },
    // Coming back to the tab shows what others changed meanwhile.
    refetchOnWindowFocus: true,
  });
  const [notice, setNotice] = useState<Notice | null>(null);
  const [pending, setPending] = useState(0);
  const inFlight = useRef(0);
  const queue = useRef<Promise<unknown>>(Promise.resolve());

  const edit = useCallback(
    /** `reportRefusal: false` when the caller shows the refusal itself (the import form does). */
    (change: PlanEdit, { reportRefusal = true }: { reportRefusal?: boolean } = {}): Promise<EditOutcome> => {
      // A state update here would render the page (every sortable card) before the request leaves.
      setTimeout(() => setPending((count) => count + 1));
      // Synchronous up to the request, so an idle page sends it at once.
      const start = (): Promise<EditOutcome> => {
        const before = queryClient.getQueryData(planQuery.queryKey);
        if (!before) {
          const refusal = { code: null, message: "The plan is not loaded yet", issues: [], details: null };
          return Promise.resolve({ ok: false, refusal });
        }
        // A refetch landing after the optimistic update would briefly show the old content.
        void queryClient.cancelQueries({ queryKey: planQuery.queryKey });
        const request = editClient.plans.edit.mutate({ planId, baseVersion: before.plan.version, edit: change });
        const optimistic = applyOptimisticEdit(before, change);
        let settled = false;
        // Query updates render synchronously in a microtask; one timer later the request is on its way.
        if (optimistic) {
          setTimeout(() => {
            if (!settled) queryClient.setQueryData(planQuery.queryKey, optimistic);
          });
        }
        return request
          .finally(() => (settled = true))
          .then(
            (saved): EditOutcome => {
              queryClient.setQueryData(planQuery.queryKey, saved);
              void queryClient.invalidateQueries(trpc.plans.versions.queryFilter({ planId }));
              setNotice({ kind: "saved", message: `Saved as version ${saved.plan.version}.` });
              return { ok: true, view: saved };
            },
            async (error): Promise<EditOutcome> => {
              queryClient.setQueryData(planQuery.queryKey, before);
              const refusal = readRefusal(error);
              if (refusal.code === "version_conflict") {
                const current = (refusal.details as { currentVersion?: number } | null)?.currentVersion;
                setNotice({
                  kind: "conflict",
                  message:
                    `Your change was not saved: someone else changed this plan meanwhile` +
                    (current ? ` (now version ${current})` : "") +
                    `. The page now shows the newer version; make your change again if it is still needed.`,
                });
                await queryClient.invalidateQueries({ queryKey: planQuery.queryKey });
                void queryClient.invalidateQueries(trpc.plans.versions.queryFilter({ planId }));
              } else if (reportRefusal) {
                setNotice({ kind: "refused", message: refusal.message });
              }
              return { ok: false, refusal };
            },
          );
      };
      const settle = () => {
        inFlight.current -= 1;
        setTimeout(() => setPending((count) => count - 1));
      };
      const result = inFlight.current === 0 ? start() : queue.current.then(start, start);
      inFlight.current += 1;
      result.then(settle, settle);
      queue.current = result;
      return result;
    },
    [planId, planQuery.queryKey, queryClient, trpc],
  );

  return { plan, edit, pending: pending > 0, notice, setNotice };
}
