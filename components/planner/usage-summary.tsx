"use client";

import { useQuery } from "@tanstack/react-query";
import { useTRPC } from "@/components/trpc";
import { formatCost, formatTokens } from "./planner-format";

type Scope = { sessionId: string } | { planId: string } | { runId: string };

/**
 * Tokens and cost of the model calls of a planning session, a plan or a run, with each call.
 * Whoever makes a call invalidates the `planner.usage` query, so this needs no polling.
 */
export function UsageSummary({ scope, label }: { scope: Scope; label: string }) {
  const trpc = useTRPC();
  const usage = useQuery(trpc.planner.usage.queryOptions(scope));
  if (!usage.data || usage.data.totals.calls === 0) return null;
  const { totals, calls } = usage.data;
  return (
    <details className="card" data-testid="llm-usage">
      <summary>
        {label}: {totals.calls} model call{totals.calls === 1 ? "" : "s"}, {formatTokens(totals.inputTokens)} in /{" "}
        {formatTokens(totals.outputTokens)} out tokens, {formatCost(totals.costUsd)}
        {totals.unpricedCalls > 0 && totals.costUsd !== null ? " (some models unpriced)" : ""}
      </summary>
      <table aria-label={`${label} per call`}>
        <thead>
          <tr>
            <th scope="col">Purpose</th>
            <th scope="col">Model</th>
            <th scope="col">Tokens in / out</th>
            <th scope="col">Cost</th>
            <th scope="col">Duration</th>
            <th scope="col">Trace / span</th>
          </tr>
        </thead>
        <tbody>
          {calls.map((call) => (
            <tr key={call.id}>
              <td>
                {call.purpose.replace("_", " ")}
                {call.ok ? "" : ` (failed: ${call.error})`}
              </td>
              <td className="mono">{call.model}</td>
              <td>
                {formatTokens(call.inputTokens)} / {formatTokens(call.outputTokens)}
              </td>
              <td>{formatCost(call.costUsd)}</td>
              <td>{(call.durationMs / 1000).toFixed(1)} s</td>
              <td className="mono">
                {call.traceId} / {call.spanId}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </details>
  );
}
