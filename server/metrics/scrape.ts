import { Gauge, Registry } from "prom-client";
import type pg from "pg";
import { ACTIVE_RUN_STATUSES } from "../vocabulary";
import { processMetrics } from "./process-metrics";

/**
 * The Prometheus exposition of one scrape: this process's own histograms and runtime metrics, and
 * gauges read from the database now. The gauges look only at runs under way (a handful of rows,
 * found by status), never at the history of finished runs, so a scrape stays cheap however many
 * runs a year leaves behind; webhook failures are the deliveries that gave up.
 */
export interface Scrape {
  contentType: string;
  text: string;
}

export interface PoolUsage {
  name: string;
  pool: Pick<pg.Pool, "totalCount" | "idleCount" | "waitingCount"> & { options?: { max?: number } };
}

export async function scrapeMetrics(pool: pg.Pool, pools: readonly PoolUsage[]): Promise<Scrape> {
  const scrape = new Registry();
  const gauge = (name: string, help: string, labelNames: string[] = []) =>
    new Gauge({ name, help, labelNames, registers: [scrape] });

  const [waiting, steps, approvals, webhooks] = await Promise.all([
    pool.query<{ workspace: string; waiting: string }>(
      `select coalesce(w.name, r.workspace_root) as workspace, count(*) as waiting
         from runs r join run_steps rs on rs.run_id = r.id
         left join workspaces w on w.id = r.workspace_id
        where r.status = any($1) and rs.status = 'ready' and rs.queued
        group by 1`,
      [ACTIVE_RUN_STATUSES],
    ),
    pool.query<{ status: string; count: string }>(
      `select rs.status, count(*) as count from runs r join run_steps rs on rs.run_id = r.id
        where r.status = any($1) group by rs.status`,
      [ACTIVE_RUN_STATUSES],
    ),
    // A gate opens when its step starts waiting: its expiry less the run's approval timeout.
    pool.query<{ waiting: string; oldest: number | null }>(
      `select count(*) as waiting,
              extract(epoch from now() - min((rs.waiting->>'expiresAt')::timestamptz
                - make_interval(secs => r.approval_timeout_ms / 1000.0)))::float8 as oldest
         from runs r join run_steps rs on rs.run_id = r.id
        where r.status = any($1) and rs.status = 'awaiting_approval'`,
      [ACTIVE_RUN_STATUSES],
    ),
    pool.query<{ failed: string; retrying: string }>(
      `select count(*) filter (where status = 'failed') as failed,
              count(*) filter (where status = 'pending' and attempts > 0) as retrying
         from webhook_deliveries where status in ('failed', 'pending')`,
    ),
  ]);

  const jobsWaiting = gauge(
    "stepwise_jobs_waiting",
    "Steps ready and queued, not yet picked up by a worker, by workspace",
    ["workspace"],
  );
  for (const row of waiting.rows) jobsWaiting.set({ workspace: row.workspace }, Number(row.waiting));

  const stepsByStatus = gauge("stepwise_steps", "Steps of runs under way, by status", ["status"]);
  for (const row of steps.rows) stepsByStatus.set({ status: row.status }, Number(row.count));

  gauge("stepwise_approvals_waiting", "Gated steps waiting for a person's decision").set(
    Number(approvals.rows[0]?.waiting ?? 0),
  );
  gauge("stepwise_approval_oldest_wait_seconds", "How long the oldest waiting gate has waited (0 when none)").set(
    Math.max(0, approvals.rows[0]?.oldest ?? 0),
  );

  const deliveries = gauge("stepwise_webhook_deliveries", "Webhook deliveries that failed or are retrying", ["state"]);
  deliveries.set({ state: "failed" }, Number(webhooks.rows[0]?.failed ?? 0));
  deliveries.set({ state: "retrying" }, Number(webhooks.rows[0]?.retrying ?? 0));

  const connections = gauge("stepwise_db_pool_connections", "This process's database connections, by pool and state", [
    "pool",
    "state",
  ]);
  const capacity = gauge("stepwise_db_pool_max", "The most connections each pool of this process may open", ["pool"]);
  for (const { name, pool: usage } of pools) {
    connections.set({ pool: name, state: "idle" }, usage.idleCount);
    connections.set({ pool: name, state: "in_use" }, usage.totalCount - usage.idleCount);
    connections.set({ pool: name, state: "waiting" }, usage.waitingCount);
    if (usage.options?.max !== undefined) capacity.set({ pool: name }, usage.options.max);
  }

  const merged = Registry.merge([processMetrics().registry, scrape]);
  return { contentType: merged.contentType, text: await merged.metrics() };
}
