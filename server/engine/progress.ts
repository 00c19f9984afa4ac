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

/** Characters of log stored per step: the first half as it comes, the last half when the step ends. */
export const STEP_LOG_CHARACTERS = 1_000_000;
/** Characters stored of one log line; a longer one ends with a note of how much was left out. */
export const STEP_LOG_LINE_CHARACTERS = 2_000;

/** What a stored line costs beyond its text (its level, time and JSON), so empty lines count too. */
export const STEP_LOG_LINE_OVERHEAD = 64;

function lineCost(line: StepLogLine): number {
  return line.message.length + STEP_LOG_LINE_OVERHEAD;
}

export interface StepLogLine {
  message: string;
  level: string;
  at: string;
}

/**
 * A step's log, bounded: lines are written as they come until half of STEP_LOG_CHARACTERS is
 * used; later lines are held in a window of the other half, oldest dropped first, and written
 * when the step ends after a line saying how many were left out. So a step that logs without
 * end stores at most about STEP_LOG_CHARACTERS, keeping how it started and how it ended, and
 * each line costs constant work (the window is a queue, not re-sliced).
 */
export class StepLogBuffer {
  private headRoom = STEP_LOG_CHARACTERS / 2;
  private pending: StepLogLine[] = [];
  private window: StepLogLine[] = [];
  private windowStart = 0;
  private windowCharacters = 0;
  private omittedLines = 0;
  private omittedCharacters = 0;
  private heldBack = false;

  add(message: string, level: string, at = new Date().toISOString()): void {
    const line: StepLogLine = {
      message:
        message.length > STEP_LOG_LINE_CHARACTERS
          ? `${message.slice(0, STEP_LOG_LINE_CHARACTERS)} … [${message.length - STEP_LOG_LINE_CHARACTERS} more characters on this line]`
          : message,
      level,
      at,
    };
    const cost = lineCost(line);
    if (!this.heldBack && cost <= this.headRoom) {
      this.headRoom -= cost;
      this.pending.push(line);
      return;
    }
    if (!this.heldBack) {
      this.heldBack = true;
      this.pending.push({
        message: `… the log passed ${STEP_LOG_CHARACTERS / 2} characters: its last part is written when the step ends`,
        level: "warn",
        at,
      });
    }
    this.window.push(line);
    this.windowCharacters += cost;
    while (this.windowCharacters > STEP_LOG_CHARACTERS / 2 && this.windowStart < this.window.length) {
      const dropped = this.window[this.windowStart++]!;
      this.windowCharacters -= lineCost(dropped);
      this.omittedLines++;
      this.omittedCharacters += dropped.message.length;
    }
    if (this.windowStart > 1024 && this.windowStart * 2 > this.window.length) {
      this.window = this.window.slice(this.windowStart);
      this.windowStart = 0;
    }
  }

  /** The lines to write now. */
  take(): StepLogLine[] {
    const lines = this.pending;
    this.pending = [];
    return lines;
  }

  /** The lines to write when the step ends: what is pending, the note of what was left out, the window. */
  finish(at = new Date().toISOString()): StepLogLine[] {
    const lines = this.take();
    if (this.omittedLines > 0) {
      lines.push({
        message: `… ${this.omittedLines} lines (${this.omittedCharacters} characters) of log left out …`,
        level: "warn",
        at,
      });
    }
    for (let index = this.windowStart; index < this.window.length; index++) lines.push(this.window[index]!);
    this.window = [];
    this.windowStart = 0;
    this.windowCharacters = 0;
    return lines;
  }
}

export class ProgressReporter {
  private latest: { percent: number; message?: string } | undefined;
  private logs = new StepLogBuffer();
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
    this.logs.add(message, level);
    this.schedule();
  }

  private schedule(): void {
    this.timer ??= setTimeout(() => {
      this.timer = undefined;
      this.writing = this.writing.then(() => this.write());
    }, PROGRESS_INTERVAL_MS);
  }

  private async write(final = false): Promise<void> {
    const progress = this.latest;
    const logs = final ? this.logs.finish() : this.logs.take();
    this.latest = undefined;
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
    await this.write(true);
  }
}
