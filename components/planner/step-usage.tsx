"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { formatCost, formatTokens } from "./planner-format";

/** Tokens and cost of the model calls an `llm_generate` step made, read once the step has finished. */
export function StepUsage({ runId, stepId }: { runId: string; stepId: string }) {
  const trpc = useTRPC();
  const usage = useQuery(trpc.planner.usage.queryOptions({ runId, stepId }));
  if (!usage.data || usage.data.totals.calls === 0) return null;
  const { totals, calls } = usage.data;
  return (
    <p className="muted" data-testid="step-llm-usage">
      Model {calls.at(-1)?.model}: {formatTokens(totals.inputTokens)} tokens in, {formatTokens(totals.outputTokens)}{" "}
      out, {formatCost(totals.costUsd)}
      {totals.calls > 1 && ` over ${totals.calls} calls`}
    </p>
  );
}
