"use client";

import { useMutation, useQuery, useQueryClient } from "@tanstack/react-query";
import { useCallback, useMemo, useRef, useState } from "react";
import { useTRPC } from "@/components/trpc";
import type { PlanEdit } from "@/server/plans/edits";
import { applyOptimisticEdit, readRefusal, type EditRefusal, type PlanView } from "./plan-rules";

export type EditOutcome = { ok: true; view: PlanView } | { ok: false; refusal: EditRefusal };

export interface Notice {
  kind: "saved" | "refused" | "conflict";
  message: string;
}

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
  // Coming back to the tab shows what others changed meanwhile.
  const plan = useQuery({ ...planQuery, refetchOnWindowFocus: true });
  const [notice, setNotice] = useState<Notice | null>(null);
  const [pending, setPending] = useState(0);
  const queue = useRef<Promise<unknown>>(Promise.resolve());

  const { mutateAsync } = useMutation(trpc.plans.edit.mutationOptions());

  const edit = useCallback(
    (change: PlanEdit): Promise<EditOutcome> => {
      setPending((count) => count + 1);
      const run = async (): Promise<EditOutcome> => {
        const before = queryClient.getQueryData(planQuery.queryKey);
        if (!before)
          return {
            ok: false,
            refusal: { code: null, message: "The plan is not loaded yet", issues: [], details: null },
          };
        await queryClient.cancelQueries({ queryKey: planQuery.queryKey });
        const optimistic = applyOptimisticEdit(before, change);
        let settled = false;
        const request = mutateAsync({ planId, baseVersion: before.plan.version, edit: change });
        if (optimistic) {
          // The request is dispatched on a timer; showing the result two timers later lets it leave
          // first, so rendering a long list overlaps the round trip instead of delaying it.
          setTimeout(() =>
            setTimeout(() => {
              if (!settled) queryClient.setQueryData(planQuery.queryKey, optimistic);
            }),
          );
        }
        try {
          const saved = await request.finally(() => (settled = true));
          queryClient.setQueryData(planQuery.queryKey, saved);
          void queryClient.invalidateQueries(trpc.plans.versions.queryFilter({ planId }));
          setNotice({ kind: "saved", message: `Saved as version ${saved.plan.version}.` });
          return { ok: true, view: saved };
        } catch (error) {
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
          } else {
            setNotice({ kind: "refused", message: refusal.message });
          }
          return { ok: false, refusal };
        } finally {
          setPending((count) => count - 1);
        }
      };
      const result = queue.current.then(run, run);
      queue.current = result;
      return result;
    },
    [mutateAsync, planId, planQuery.queryKey, queryClient, trpc],
  );

  return { plan, edit, pending: pending > 0, notice, setNotice };
}
