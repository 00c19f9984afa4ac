import type pg from "pg";
import { FINISHED_RUN_STATUSES, isIn } from "../vocabulary";

/*
 * Stop means stop for a DONE integrated off the agent's call (task-reports.ts): a person who
 * cancels the run, or skips the task, while its verifiers run or its merge waits its turn, gets
 * no commit, no merge into the run's branch and no verifier left running after that.
 */

/** The report's run or task was stopped since it was made: nothing more of it may happen. */
export class ReportOutdated extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ReportOutdated";
  }
}

/** Throws `ReportOutdated` unless the run is still going and the task still the agent's to finish. */
export async function reportStillWanted(pool: pg.Pool, runId: string, stepId: string): Promise<void> {
  const rows = await pool.query<{ run: string; step: string }>(
    `select u.status as run, r.status as step
       from run_steps r join runs u on u.id = r.run_id
      where r.run_id = $1 and r.step_id = $2`,
    [runId, stepId],
  );
  const row = rows.rows[0];
  if (!row) throw new ReportOutdated("the task is no longer in its run");
  if (isIn(FINISHED_RUN_STATUSES, row.run)) throw new ReportOutdated(`the run was ${row.run}`);
  if (row.step !== "running" && row.step !== "awaiting_agent") throw new ReportOutdated(`the task was ${row.step}`);
}

/**
 * The stop behind a failure, if the run or task was stopped since the report: whatever failed
 * (a git whose worktree the cancel removed) is then the stop, not something to try again.
 */
export async function stopSince(pool: pg.Pool, runId: string, stepId: string): Promise<ReportOutdated | undefined> {
  return reportStillWanted(pool, runId, stepId).then(
    () => undefined,
    (error: unknown) => (error instanceof ReportOutdated ? error : undefined),
  );
}

/** How often a running integration looks whether its run or task was stopped. */
const WATCH_EVERY_MS = 1_000;

/**
 * A signal that aborts (with a `ReportOutdated` reason) once the run or task is stopped, looked at
 * every second while the integration runs: a verifier of an hour ends within a second of a cancel.
 */
export function watchReportStopped(
  pool: pg.Pool,
  runId: string,
  stepId: string,
): { signal: AbortSignal; end: () => void } {
  const controller = new AbortController();
  const timer = setInterval(() => {
    reportStillWanted(pool, runId, stepId).catch((error: unknown) => {
      // Only a stop ends it; a failed look is looked at again.
      if (error instanceof ReportOutdated) controller.abort(error);
    });
  }, WATCH_EVERY_MS);
  timer.unref();
  return { signal: controller.signal, end: () => clearInterval(timer) };
}
