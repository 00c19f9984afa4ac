import type { PrismaClient } from "../generated/prisma/client";
import { parseModelId, type ModelPrice, type PlannerConfig } from "./config";

export interface TokenUsage {
  inputTokens: number;
  outputTokens: number;
}

/** The price of a model: an exact name, else the longest known prefix (dated snapshots). */
export function priceOf(config: Pick<PlannerConfig, "prices">, modelIdOrName: string): ModelPrice | undefined {
  const name = parseModelId(modelIdOrName)?.model ?? modelIdOrName;
  if (config.prices[modelIdOrName]) return config.prices[modelIdOrName];
  if (config.prices[name]) return config.prices[name];
  const prefix = Object.keys(config.prices)
    .filter((known) => name.startsWith(known))
    .sort((a, b) => b.length - a.length)[0];
  return prefix ? config.prices[prefix] : undefined;
}

/** US dollars for one call; undefined when the model's price is unknown (local models). */
export function costOf(config: Pick<PlannerConfig, "prices">, model: string, usage: TokenUsage): number | undefined {
  const price = priceOf(config, model);
  if (!price) return undefined;
  return (usage.inputTokens * price.input + usage.outputTokens * price.output) / 1_000_000;
}

export interface UsageTotals {
  calls: number;
  inputTokens: number;
  outputTokens: number;
  /** Sum over the calls with a known price; null when none had one. */
  costUsd: number | null;
  /** Calls whose model has no known price, so the cost is a lower bound. */
  unpricedCalls: number;
  failedCalls: number;
}

export interface LlmCallView {
  id: string;
  purpose: string;
  model: string;
  inputTokens: number;
  outputTokens: number;
  costUsd: number | null;
  durationMs: number;
  ok: boolean;
  error: string | null;
  traceId: string;
  spanId: string;
  createdAt: string;
}

export type UsageScope =
  { sessionId: string } | { planId: string } | { runId: string } | { runId: string; stepId: string };

/** Token usage and cost of every model call of a planning session, a plan (all its sessions) or a run. */
export async function getUsage(
  prisma: PrismaClient,
  scope: UsageScope,
): Promise<{ totals: UsageTotals; calls: LlmCallView[] }> {
  const rows = await prisma.llmCall.findMany({ where: scope, orderBy: { createdAt: "asc" }, take: 500 });
  const priced = rows.filter((row) => row.costUsd !== null);
  return {
    totals: {
      calls: rows.length,
      inputTokens: rows.reduce((sum, row) => sum + row.inputTokens, 0),
      outputTokens: rows.reduce((sum, row) => sum + row.outputTokens, 0),
      costUsd: priced.length ? priced.reduce((sum, row) => sum + row.costUsd!, 0) : null,
      unpricedCalls: rows.length - priced.length,
      failedCalls: rows.filter((row) => !row.ok).length,
    },
    calls: rows.map((row) => ({
      id: row.id,
      purpose: row.purpose,
      model: row.model,
      inputTokens: row.inputTokens,
      outputTokens: row.outputTokens,
      costUsd: row.costUsd,
      durationMs: row.durationMs,
      ok: row.ok,
      error: row.error,
      traceId: row.traceId,
      spanId: row.spanId,
      createdAt: row.createdAt.toISOString(),
    })),
  };
}
