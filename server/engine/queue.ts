import type pg from "pg";

export const RUN_STEP_TASK = "run_step";
const QUEUE_ATTEMPTS = 5;

export interface StepJob {
  runId: string;
  stepId: string;
  /** The attempt this job will make; part of the job key so retries never collide. */
  attempt: number;
  runAt?: Date;
}

/**
 * Enqueues step jobs on graphile-worker inside the caller's transaction, so a step is queued if
 * and only if the state change that made it ready commits.
 */
export async function enqueueStepJobs(client: Pick<pg.ClientBase, "query">, jobs: StepJob[]): Promise<void> {
  if (jobs.length === 0) return;
  await client.query(
    `select count(*)::int as queued from graphile_worker.add_jobs(array(
       select row($1::text, json_build_object('runId', j.run_id, 'stepId', j.step_id, 'attempt', j.attempt),
                  null::text, j.run_at, $3::int, j.job_key, null::int, null::text[])::graphile_worker.job_spec
       from jsonb_to_recordset($2::jsonb) as j(run_id text, step_id text, attempt int, run_at timestamptz, job_key text)
     ))`,
    [
      RUN_STEP_TASK,
      JSON.stringify(
        jobs.map((job) => ({
          run_id: job.runId,
          step_id: job.stepId,
          attempt: job.attempt,
          run_at: job.runAt?.toISOString() ?? null,
          job_key: `${job.runId}:${job.stepId}:${job.attempt}`,
        })),
      ),
      // Queue-level attempts cover infrastructure failures (a lost connection while recording);
      // the engine's own retry policy decides about tool errors.
      QUEUE_ATTEMPTS,
    ],
  );
}
