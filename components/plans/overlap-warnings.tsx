"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import type { PlanEdit } from "@/server/plans/edits";
import type { Step } from "@/server/plan-schema";
import type { EditOutcome } from "./use-plan-editor";

/**
 * Before approval: steps that may run at the same time and touch the same files (from their
 * relevant paths; `server/plans/overlap.ts`) are named, each with a one-click dependency that
 * serialises them — a plan edit like any other, so a new version.
 */
export function OverlapWarnings({
  planId,
  version,
  steps,
  edit,
  disabled,
}: {
  planId: string;
  version: number;
  steps: Step[];
  edit: (change: PlanEdit) => Promise<EditOutcome>;
  disabled: boolean;
}) {
  const trpc = useTRPC();
  const overlaps = useQuery({ ...trpc.plans.overlaps.queryOptions({ planId, version }), staleTime: Infinity });
  const warnings = overlaps.data ?? [];
  if (warnings.length === 0) return null;
  return (
    <section className="banner warn" aria-labelledby="overlap-heading" data-testid="overlap-warnings">
      <h2 id="overlap-heading" className="banner-title">
        Parallel work on the same files
      </h2>
      <ul>
        {warnings.map((warning) => {
          const later = steps.find((step) => step.id === warning.second);
          return (
            <li key={`${warning.first}-${warning.second}`} className="row">
              <span>{warning.message}.</span>
              <button
                type="button"
                disabled={disabled || !later || later.dependsOn.includes(warning.first)}
                onClick={() =>
                  later &&
                  void edit({
                    kind: "updateStep",
                    stepId: later.id,
                    changes: { dependsOn: [...later.dependsOn, warning.first] },
                  })
                }
              >
                {warning.fixLabel}
              </button>
            </li>
          );
        })}
      </ul>
    </section>
  );
}
