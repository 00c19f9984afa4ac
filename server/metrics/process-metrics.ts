import { collectDefaultMetrics, Histogram, Registry } from "prom-client";

/**
 * The metrics this process observes as things happen (step jobs it ran, its own Node.js runtime),
 * as opposed to the gauges read from the database at each scrape (`scrape.ts`). One registry per
 * process, kept on globalThis: Next.js bundles route handlers apart from the server module that
 * runs the worker, and both must see the same histograms.
 */
interface ProcessMetrics {
  registry: Registry;
  stepDuration: Histogram<"tool" | "outcome">;
  queueLatency: Histogram;
}

const KEY = Symbol.for("stepwise.processMetrics");
type GlobalWithMetrics = typeof globalThis & { [KEY]?: ProcessMetrics };

/** Steps run from seconds to an hour; the queue should hand them over well under a second. */
const DURATION_BUCKETS = [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600];
const LATENCY_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

export function processMetrics(): ProcessMetrics {
  const holder = globalThis as GlobalWithMetrics;
  if (!holder[KEY]) {
    const registry = new Registry();
    collectDefaultMetrics({ register: registry, prefix: "stepwise_" });
    holder[KEY] = {
      registry,
      stepDuration: new Histogram({
        name: "stepwise_step_duration_seconds",
        help: "How long each step attempt this process ran took, from its claim to its outcome, by tool and outcome",
        labelNames: ["tool", "outcome"],
        buckets: DURATION_BUCKETS,
        registers: [registry],
      }),
      queueLatency: new Histogram({
        name: "stepwise_step_queue_latency_seconds",
        help: "From the moment a step job was due in the queue to the moment this process's worker picked it up",
        buckets: LATENCY_BUCKETS,
        registers: [registry],
      }),
    };
  }
  return holder[KEY];
}

/** A step attempt this process ran, as its outcome is recorded. */
export function observeStepDuration(tool: string, ok: boolean, durationMs: number): void {
  processMetrics().stepDuration.observe({ tool, outcome: ok ? "ok" : "failed" }, durationMs / 1000);
}

/**
 * A step job this process's worker picked up, `dueAt` being when the queue would first have handed
 * it out. Steps a worker runs straight on as continuations of the step before (claim.ts) never
 * wait in the queue and are not counted here.
 */
export function observeQueueLatency(dueAt: Date): void {
  processMetrics().queueLatency.observe(Math.max(0, (Date.now() - dueAt.getTime()) / 1000));
}
