"use client";

import { RunsList } from "./runs-list";

/** The history of a plan's runs, newest first, each linking to its live view. */
export function PlanRuns({ planId }: { planId: string }) {
  return <RunsList planId={planId} heading="Runs of this plan" />;
}
