/**
 * The comparison baseline for W1–W3: a small hand-written loop of claim/complete statements on
 * Stepwise's own tables, doing the same work with the same durability but none of the engine's
 * features. `npm run bench -- --baseline` runs it beside the engine, interleaved.
 *
 * What it does, per step:
 * - claim: one autocommitted statement takes the first ready step (`for update skip locked`) and
 *   marks it running with its attempt, so the claim is committed before the tool starts;
 * - execute the same tool (`execute` of the same definition, input parsed by its schema);
 * - complete: one transaction records the result, locks the pending dependents (in a fixed order,
 *   so two completions never deadlock), then in a fresh statement — which sees every completion
 *   committed before it got those locks — releases those whose dependencies have all completed
 *   and, for a sink (a step nothing depends on), counts the run's open sinks down, finishing the
 *   run at zero. Committed before any freed step is looked for.
 *
 * What it does not do (the engine does): events, the live stream, approvals and their binding
 * checks, leases and recovery, per-run parallelism limits, retries, cancellation, job queue
 * fallback for other processes. Idle loops are woken in-process when a completion frees steps (and
 * poll every 50 ms as a fallback); the run counts as finished when the finishing commit returns.
 */
import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { StepInput } from "../server/plan-schema";
import type { ToolRegistry } from "../server/tools/registry";

// The lease keeps the engine's recovery (the bench process runs a Stepwise worker on the same
// tables) from taking these running steps for a dead worker's: without it, it re-queued them.
// The locking pick is a materialized CTE, evaluated exactly once, and the update checks the step
// is still ready: the usual safe form of a `skip locked` claim.
const CLAIM = `with c as materialized (
    select step_id from run_steps where run_id = $1 and status = 'ready'
    order by position limit 1 for update skip locked
  )
  update run_steps rs set status = 'running', attempt = rs.attempt + 1, started_at = clock_timestamp(),
    lease_expires_at = clock_timestamp() + interval '1 hour'
  from c where rs.run_id = $1 and rs.step_id = c.step_id and rs.status = 'ready'
  returning rs.step_id, rs.attempt`;

const COMPLETE_AND_LOCK_DEPENDENTS = `with done as (
    update run_steps set status = 'completed', result = $3::jsonb, progress = 100, finished_at = clock_timestamp()
    where run_id = $1 and step_id = $2 and status = 'running' and attempt = $4
    returning step_id
  ),
  locked as (
    select rs.step_id from run_steps rs, done
    where rs.run_id = $1 and rs.status = 'pending' and rs.depends_on @> array[done.step_id]
    order by rs.step_id
    for update of rs
  )
  select (select count(*)::int from done) as done,
         coalesce((select array_agg(step_id) from locked), '{}') as dependents`;

const RELEASE_AND_COUNT = `with released as (
    update run_steps rs set status = 'ready'
    where rs.run_id = $1 and rs.step_id = any($2::text[]) and rs.status = 'pending'
      and not exists (select 1 from run_steps d
                      where d.run_id = $1 and d.step_id = any(rs.depends_on) and d.status <> 'completed')
    returning 1
  ),
  counted as (
    update runs set open_steps = open_steps - 1,
      status = case when open_steps = 1 then 'completed' else status end,
      finished_at = case when open_steps = 1 then clock_timestamp() else finished_at end
    where id = $1 and $3::boolean
    returning open_steps
  )
  select (select count(*)::int from released) as released, (select open_steps from counted) as open`;

export interface RawLoopResult {
  makespan: number;
  valid: boolean;
}

/** Runs `steps` (a plan already stored as `planId`, version 1) through the raw loop; times it. */
export async function runRawLoop(
  pool: pg.Pool,
  tools: ToolRegistry,
  planId: string,
  steps: StepInput[],
  concurrency: number,
): Promise<RawLoopResult> {
  const runId = randomUUID();
  const byId = new Map(steps.map((step) => [step.id, step]));
  // The run counts down its sinks (steps nothing depends on), not all its steps: every step is an
  // ancestor of a sink, so the run is done when they are, and only their completions touch the
  // run's row (a counter every completion updated would serialise them all on that row).
  const sinks = new Set(steps.map((step) => step.id));
  for (const step of steps) for (const dep of step.dependsOn ?? []) sinks.delete(dep);
  let generation = 0;
  let waiters: (() => void)[] = [];
  const wake = (n: number) => {
    generation++;
    for (const resolve of waiters.splice(0, n)) resolve();
  };
  let finished = false;
  let finishedAt = 0;
  let failure: unknown;

  const started = performance.now();
  const client = await pool.connect();
  try {
    await client.query("begin");
    await client.query(
      `insert into runs (id, plan_id, plan_version, status, max_parallel, trace_id, approved_by, workspace_root,
                         open_steps, started_at)
       values ($1, $2, 1, 'running', 1000, $3, 'bench', '/tmp', $4, now())`,
      [runId, planId, randomUUID(), sinks.size],
    );
    await client.query(
      `insert into run_steps (run_id, step_id, position, tool, status, depends_on)
       select $1, s.id, s.position, s.tool, s.status, s.depends_on
       from jsonb_to_recordset($2::jsonb) as s(id text, position int, tool text, status text, depends_on text[])`,
      [
        runId,
        JSON.stringify(
          steps.map((step, position) => ({
            id: step.id,
            position,
            tool: step.tool,
            status: (step.dependsOn ?? []).length === 0 ? "ready" : "pending",
            depends_on: step.dependsOn ?? [],
          })),
        ),
      ],
    );
    await client.query("commit");
  } finally {
    client.release();
  }

  async function complete(stepId: string, attempt: number, result: unknown) {
    const tx = await pool.connect();
    try {
      await tx.query("begin");
      const locked = await tx.query<{ done: number; dependents: string[] }>({
        name: "raw_complete",
        text: COMPLETE_AND_LOCK_DEPENDENTS,
        values: [runId, stepId, JSON.stringify(result), attempt],
      });
      const { done, dependents } = locked.rows[0]!;
      // Not this attempt's to complete (it never is here; a guard, not a path): nothing counts.
      if (done === 0) throw new Error(`raw loop: ${stepId} attempt ${attempt} was not running`);
      const counted = await tx.query<{ released: number; open: number }>({
        name: "raw_release",
        text: RELEASE_AND_COUNT,
        values: [runId, dependents, sinks.has(stepId)],
      });
      await tx.query("commit");
      return counted.rows[0]!;
    } catch (error) {
      await tx.query("rollback").catch(() => undefined);
      throw error;
    } finally {
      tx.release();
    }
  }

  async function loop() {
    while (!finished) {
      const seen = generation;
      const claimed = await pool.query<{ step_id: string; attempt: number }>({
        name: "raw_claim",
        text: CLAIM,
        values: [runId],
      });
      const row = claimed.rows[0];
      if (!row) {
        if (generation !== seen || finished) continue; // something was freed meanwhile: look again
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 50).unref();
        });
        continue;
      }
      const step = byId.get(row.step_id)!;
      const tool = tools.get(step.tool)!;
      const controller = new AbortController();
      const value = await tool.execute(tool.inputSchema.parse(step.args), {
        signal: controller.signal,
        workspaceRoot: "/tmp",
        runId,
        stepId: step.id,
        attempt: row.attempt,
        idempotencyKey: `${runId}:${step.id}`,
        effectsStarting: async () => undefined,
        reportProgress: () => undefined,
        log: () => undefined,
      });
      const { released, open } = await complete(step.id, row.attempt, { ok: true, value: value ?? null });
      if (open === 0) {
        finished = true;
        finishedAt = performance.now();
        wake(waiters.length);
      } else if (released > 0) {
        wake(released);
      }
    }
  }

  await Promise.all(
    Array.from({ length: concurrency }, () =>
      loop().catch((error: unknown) => {
        failure ??= error;
        finished = true;
        wake(waiters.length);
      }),
    ),
  );
  waiters = [];
  if (failure) throw failure;
  return { makespan: finishedAt - started, valid: await checkRawOrder(pool, runId, steps.length) };
}

/** Every step completed once, and none started before all of its dependencies had finished. */
async function checkRawOrder(pool: pg.Pool, runId: string, size: number): Promise<boolean> {
  const result = await pool.query<{ completed: number; early: number; attempts: number }>(
    `select count(*) filter (where s.status = 'completed')::int as completed,
            coalesce(sum(s.attempt), 0)::int as attempts,
            count(*) filter (where exists (
              select 1 from run_steps d where d.run_id = s.run_id and d.step_id = any(s.depends_on)
                and (d.finished_at is null or d.finished_at > s.started_at)))::int as early
     from run_steps s where s.run_id = $1`,
    [runId],
  );
  const { completed, early, attempts } = result.rows[0]!;
  return completed === size && attempts === size && early === 0;
}
