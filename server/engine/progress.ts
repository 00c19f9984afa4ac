import type pg from "pg";
import { inTransaction } from "../db";
import { appendEvents } from "../events/store";
import type { NewEvent } from "../events/types";
import { logger } from "../logger";
import type { RunRow } from "./run-transaction";

/**
 * Progress and log lines are buffered and written at most every PROGRESS_INTERVAL_MS, so a chatty
 * tool costs a bounded number of transactions however often it reports. They are written only
 * while the step still runs this attempt on this worker: an attempt whose step was taken over (its
 * lease lapsed while its process was frozen) or cancelled says nothing more on the run's stream.
 */
const PROGRESS_INTERVAL_MS = 200;

export class ProgressReporter {
  private latest: { percent: number; message?: string } | undefined;
  private logs: { message: string; level: string; at: string }[] = [];
  private timer: NodeJS.Timeout | undefined;
  private writing: Promise<void> = Promise.resolve();

  constructor(
    private readonly pool: pg.Pool,
    private readonly run: RunRow,
    private readonly stepId: string,
    private readonly attempt: number,
    private readonly workerId: string | undefined,
  ) {}

  progress(percent: number, message?: string): void {
    this.latest = { percent: Math.max(0, Math.min(100, Math.round(percent))), ...(message && { message }) };
    this.schedule();
  }

  log(message: string, level: string): void {
    if (this.logs.length < 1000)
      this.logs.push({ message: message.slice(0, 2000), level, at: new Date().toISOString() });
    this.schedule();
  }

  private schedule(): void {
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.writing = this.writing.then(() => this.write());
    }, PROGRESS_INTERVAL_MS);
  }

  private async write(): Promise<void> {
    const progress = this.latest;
    const logs = this.logs;
    this.latest = undefined;
    this.logs = [];
    if (!progress && logs.length === 0) return;
    const events: NewEvent[] = [];
    if (progress)
      events.push({
        type: "step.progress",
        stepId: this.stepId,
        data: { progress: progress.percent, ...(progress.message && { message: progress.message }) },
      });
    if (logs.length) events.push({ type: "step.log", stepId: this.stepId, data: { lines: logs } });
    await inTransaction(this.pool, async (client) => {
      const still = await client.query(
        `update run_steps set progress = coalesce($3, progress)
         where run_id = $1 and step_id = $2 and status = 'running' and attempt = $4 and worker_id is not distinct from $5`,
        [this.run.id, this.stepId, progress?.percent ?? null, this.attempt, this.workerId ?? null],
      );
      if (still.rowCount === 0) return;
      await appendEvents(
        client,
        { streamId: this.run.id, planId: this.run.plan_id, runId: this.run.id, traceId: this.run.trace_id },
        events,
      );
    }).catch((error: unknown) => {
      // Best effort: the step goes on; its outcome is recorded however this write fared.
      logger.warn({ runId: this.run.id, stepId: this.stepId, err: error }, "writing a step's progress failed");
    });
  }

  async close(): Promise<void> {
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.writing;
    await this.write();
  }
}
