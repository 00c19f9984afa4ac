import type pg from "pg";
import { authority as productionAuthority, type Authority } from "../policy/authority";
import type { ToolRegistry } from "../tools/registry";
import { RunGraphCache } from "./graph";

export interface EngineDeps {
  pool: pg.Pool;
  tools: ToolRegistry;
  /**
   * The authority policy every door and the engine of this context ask (server/policy/authority.ts):
   * the production rules, or — in the model-based test — the same rules less one, to show the test
   * catches the weakened policy.
   */
  authority: Authority;
  graphs: RunGraphCache;
  /** Aborts in-flight steps of runs cancelled from this or another process. */
  cancellations: Map<string, Set<AbortController>>;
  /** Set in worker processes: recorded on claimed steps so recovery knows whose they are. */
  workerId?: string;
  /** Set in worker processes: host and pid, told on `step.running` so a person sees who runs a step. */
  workerName?: string;
  /**
   * Worker processes only: how many steps this process may run as continuations — dependents it
   * claims itself in the transaction that made them ready, skipping a queue round trip.
   */
  continuationSlots?: { limit: number; used: number };
  /**
   * The engine of the worker running in this process, while it runs (set by `startStepWorker` on
   * the engine it was given): a run approved here starts its first steps on it (`startRun`).
   */
  localWorker?: EngineDeps;
  /** Set when the process shuts down: transactions stop retrying lost connections. */
  stopping?: boolean;
  /**
   * Worker processes only: how long a claimed attempt's lease lasts without renewal, and the
   * attempts this process is executing (or still recording), whose leases its heartbeat renews.
   */
  leaseMs?: number;
  /**
   * Worker processes only: told of each delayed step job (a retry's backoff) a transaction queues,
   * with its delay, to wake the queue when it is due — graphile-worker finds delayed jobs only by
   * polling, which a worker does seldom (see `queuePollIntervalMs`).
   */
  wakeQueueIn?: (delayMs: number) => void;
  inFlight?: Map<string, { runId: string; stepId: string; attempt: number; controller: AbortController }>;
  /**
   * Fault injection for tests: called inside each step transaction (claims and outcomes) after its
   * work, before its write-back and commit (one round trip), e.g. to freeze the process while it
   * holds the run's lock.
   */
  beforeCommit?: (runId: string, ops: readonly { kind: "claim" | "record"; job: { stepId: string } }[]) => void;
  /**
   * Set by the app context: asks the planner for a recovery of a failed step of an `auto` run and
   * applies it (server/planner/auto-recovery.ts). Without it the job leaves the step to a person.
   */
  autoRecover?: (job: { runId: string; stepId: string; attempt: number }) => Promise<void>;
  /**
   * Set by the app context: fills a template into a new plan for a `run_plan` step's child run
   * (server/engine/child-runs.ts). Without it, template sub-plans fail with a clear reason.
   */
  resolveTemplatePlan?: ChildPlanResolver;
  now?: () => Date;
  random?: () => number;
}

export function createEngineDeps(
  pool: pg.Pool,
  tools: ToolRegistry,
  authority: Authority = productionAuthority,
): EngineDeps {
  return { pool, tools, authority, graphs: new RunGraphCache(), cancellations: new Map() };
}

/**
 * A template sub-plan to fill: what `resolveTemplatePlan` is asked. Templates are never changed
 * once saved (only deleted), so the step's approval, which names the template, binds its content.
 */
export interface ChildPlanRequest {
  templateId: string;
  params: Record<string, string>;
  actor: string;
  workspaceId: string | null;
  workspaceRoot: string;
}

/** Resolves a template sub-plan to a new plan's first version. */
export type ChildPlanResolver = (request: ChildPlanRequest) => Promise<{ planId: string; version: number }>;
