import type pg from "pg";

/**
 * How many of its own heartbeats a worker may miss before its running steps count as interrupted
 * (leases.ts) and its queue jobs are freed (below): one liveness rule for both.
 */
export const MISSED_BEATS = 5;

/**
 * Queue jobs held by a dead worker. graphile-worker locks a job to the runner that took it
 * (`locked_by`, the runner's random pool id) and frees a lock only after 4 hours; a worker killed
 * with SIGKILL left webhook deliveries, fanouts, planning sessions and timers waiting that long.
 * Each worker process records its runners' ids beside its heartbeat row (`workers.queue_worker_ids`,
 * see `recordQueueWorkerId`), so the same liveness rule that recovers its steps frees its jobs: once
 * its heartbeat is older than five of its own beats, or it stopped, by the database's clock.
 *
 * A freed job runs again from the start on whichever worker takes it next. Step jobs are
 * protected by their claims (a step no longer ready at the job's attempt claims nothing); every
 * other job re-checks the state it acts on (a delivery's attempt counter, a session's status, a
 * timer's expiry). A lock held by a runner no worker row names (a process killed in the moment
 * between starting its runner and recording the id, or a runner of a version before this rule) is
 * freed after `UNKNOWN_LOCK_AFTER` — still well inside the queue's own 4 hours.
 */
export const UNKNOWN_LOCK_AFTER = "10 minutes";

/** Records a runner's pool id as this worker's, before or while it takes its first job. */
export async function recordQueueWorkerId(
  pool: Pick<pg.Pool, "query">,
  workerId: string,
  queueWorkerId: string,
): Promise<void> {
  await pool.query(
    `update workers set queue_worker_ids = array_append(coalesce(queue_worker_ids, '{}'), $2)
     where id = $1 and not ($2 = any(coalesce(queue_worker_ids, '{}')))`,
    [workerId, queueWorkerId],
  );
}

/**
 * Frees the queue jobs locked by runners of dead workers (never the recovering worker's own: it is
 * alive even when its heartbeat went stale while the database was out of reach). Returns how many
 * runners' locks were freed.
 */
export async function unlockJobsOfDeadWorkers(
  pool: Pick<pg.Pool, "query">,
  recoveringWorkerId: string | undefined,
): Promise<number> {
  const dead = await pool.query<{ id: string }>(
    `with held as (
       select j.locked_by as id, min(j.locked_at) as since from graphile_worker._private_jobs j
       where j.locked_by is not null group by j.locked_by
     )
     select h.id from held h left join workers w on h.id = any(w.queue_worker_ids)
     where case when w.id is null then h.since < now() - interval '${UNKNOWN_LOCK_AFTER}'
                else w.id is distinct from $1::uuid and (w.stopped_at is not null
                  or w.last_seen < now() - make_interval(secs => w.heartbeat_ms * ${MISSED_BEATS} / 1000.0))
           end`,
    [recoveringWorkerId ?? null],
  );
  if (dead.rowCount === 0) return 0;
  // graphile-worker's own function: frees the jobs (and named queues) those runners locked.
  await pool.query("select graphile_worker.force_unlock_workers($1::text[])", [dead.rows.map((row) => row.id)]);
  return dead.rowCount ?? 0;
}

/**
 * The queue jobs this process has in hand: each job id while its task runs, and a minute after,
 * so that a job finished but not yet marked complete by the queue is not taken for one nobody runs.
 */
export class JobsInHand {
  private readonly held = new Map<string, number>();

  /** `task` with every job it runs counted as in hand. */
  track<P, H extends { job: { id: string } }>(task: (payload: P, helpers: H) => Promise<void>) {
    return async (payload: P, helpers: H): Promise<void> => {
      const id = helpers.job.id;
      this.held.set(id, (this.held.get(id) ?? 0) + 1);
      try {
        await task(payload, helpers);
      } finally {
        setTimeout(() => {
          const left = (this.held.get(id) ?? 1) - 1;
          if (left > 0) this.held.set(id, left);
          else this.held.delete(id);
        }, 60_000).unref();
      }
    };
  }

  ids(): string[] {
    return [...this.held.keys()];
  }
}

/**
 * Jobs locked by this process's own runners that it does not have in hand. graphile-worker locks
 * a job as it hands it out (`get_job`, committed on its own); a runner whose answer was lost with
 * its connection never runs the job, and while this process lives no peer frees the lock — the
 * queue's own expiry is 4 hours. A webhook delivery, a planning session or a sub-plan's start
 * then waited that long (a step's job is re-queued beside it, `requeueStrandedJobs`). Such a lock
 * older than `olderThanMs` is freed; the job runs again from the start, as a dead worker's does.
 */
export async function freeJobsNotInHand(
  pool: Pick<pg.Pool, "query">,
  runnerIds: readonly string[],
  inHand: JobsInHand,
  olderThanMs: number,
): Promise<number> {
  if (runnerIds.length === 0) return 0;
  const freed = await pool.query<{ n: number }>(
    `with freed as (
       update graphile_worker._private_jobs set locked_at = null, locked_by = null
        where locked_by = any($1::text[]) and locked_at < now() - make_interval(secs => $3)
          and id <> all($2::bigint[])
        returning id)
     select count(*)::int as n from freed`,
    [runnerIds, inHand.ids(), olderThanMs / 1000],
  );
  return freed.rows[0]?.n ?? 0;
}
