import { access, appendFile, readFile } from "node:fs/promises";
import { setTimeout as delay } from "node:timers/promises";
import { z } from "zod";
import type { StoredEvent } from "../server/events/types";
import { canTransition } from "../server/engine/state-machine";
import type { StepStatus } from "../server/plan-schema";
import { builtinTools, createToolRegistry, type ToolRegistry } from "../server/tools/registry";
import { defineTool } from "../server/tools/types";

/** The env var naming the file a probe appends its executions to (read at execution time). */
export const PROBE_LOG_ENV = "STEPWISE_PROBE_LOG";

/** One tick of a probe told to tick (`tickMs`), or its last line when it was aborted. */
export interface ProbeTick {
  runId: string;
  stepId: string;
  attempt: number;
  pid: number;
  tick?: number;
  /** Set on the line written when its abort signal fired: the abort reason. */
  aborted?: string;
}

/** One execution of the probe tool, as appended to the probe log. */
export interface ProbeExecution {
  runId: string;
  stepId: string;
  attempt: number;
  pid: number;
}

/**
 * A test-only tool that leaves evidence of every execution outside the database: one line per
 * execution, appended (O_APPEND, one write) before it does anything else, so even an execution
 * killed mid-way is counted. It then sleeps `sleepMs`, honouring its abort signal. `probe` is
 * idempotent, so the engine may re-run it after its worker died; `probe_once` is the same tool
 * declared non-idempotent, which the engine must never re-run on its own. With `marksEffectStart`
 * (`probe_effect`) it first waits `sleepBeforeEffectMs`, then marks its effect's start and only
 * then records the execution: a kill during that first wait interrupts it before any effect.
 * With `tickMs` it leaves a side effect while it sleeps: every `tickMs` it appends a tick to
 * `<log>.ticks` and reports progress, and when aborted it appends the reason there. Attempts after
 * the first sleep `retrySleepMs` when given. With `releaseFile` the sleep ends as soon as that file
 * exists (`sleepMs` is then the most it waits): a test holds a step exactly as long as it needs it
 * running, instead of a fixed length chosen to outlast a slow machine.
 */
export function createProbeTool(
  options: { logFile?: string; name?: string; idempotent?: boolean; marksEffectStart?: boolean } = {},
) {
  const idempotent = options.idempotent ?? true;
  return defineTool({
    name: options.name ?? "probe",
    description: `Test probe (${idempotent ? "idempotent" : "not idempotent"}): records each execution in a file, then optionally sleeps.`,
    inputSchema: z.object({
      sleepMs: z.number().int().min(0).max(600_000).default(0),
      sleepBeforeEffectMs: z.number().int().min(0).max(600_000).default(0),
      retrySleepMs: z.number().int().min(0).max(600_000).optional(),
      tickMs: z.number().int().min(1).max(60_000).optional(),
      releaseFile: z.string().optional(),
      value: z.unknown().optional(),
    }),
    capability: "data.transform",
    capabilityLabel: "Test probe",
    readOnly: true,
    destructive: false,
    idempotent,
    requiresApproval: false,
    defaultTimeoutSeconds: 600,
    marksEffectStart: options.marksEffectStart ?? false,
    async execute({ sleepMs, sleepBeforeEffectMs, retrySleepMs, tickMs, releaseFile, value }, context) {
      const logFile = options.logFile ?? process.env[PROBE_LOG_ENV];
      if (!logFile) throw new Error(`The probe tool needs ${PROBE_LOG_ENV} (or a logFile) to record executions`);
      if (options.marksEffectStart) {
        if (sleepBeforeEffectMs > 0) await delay(sleepBeforeEffectMs, undefined, { signal: context.signal });
        await context.effectsStarting();
      }
      const execution: ProbeExecution = {
        runId: context.runId,
        stepId: context.stepId,
        attempt: context.attempt,
        pid: process.pid,
      };
      await appendFile(logFile, `${JSON.stringify(execution)}\n`, { flag: "a" });
      const sleep = context.attempt > 1 && retrySleepMs !== undefined ? retrySleepMs : sleepMs;
      if (tickMs) await tick(`${logFile}.ticks`, execution, sleep, tickMs, context);
      else if (releaseFile) await waitForFile(releaseFile, sleep, context.signal);
      else if (sleep > 0) await delay(sleep, undefined, { signal: context.signal });
      return { ...execution, value: value ?? null };
    },
  });
}

/** Until `file` exists, or `maxMs` has passed; honours the abort signal. */
async function waitForFile(file: string, maxMs: number, signal: AbortSignal): Promise<void> {
  const deadline = Date.now() + maxMs;
  while (Date.now() < deadline) {
    if (
      await access(file).then(
        () => true,
        () => false,
      )
    )
      return;
    await delay(50, undefined, { signal });
  }
}

/** Sleeps `sleepMs` in steps of `tickMs`, appending a tick and reporting progress after each. */
async function tick(
  file: string,
  execution: ProbeExecution,
  sleepMs: number,
  tickMs: number,
  context: { signal: AbortSignal; reportProgress(percent: number, message?: string): void },
): Promise<void> {
  try {
    for (let tick = 1; tick * tickMs <= sleepMs; tick++) {
      await delay(tickMs, undefined, { signal: context.signal });
      await appendFile(file, `${JSON.stringify({ ...execution, tick } satisfies ProbeTick)}\n`, { flag: "a" });
      context.reportProgress((100 * tick * tickMs) / sleepMs, `attempt ${execution.attempt} tick ${tick}`);
    }
  } catch (error) {
    if (!context.signal.aborted) throw error;
    const reason =
      context.signal.reason instanceof Error ? context.signal.reason.message : String(context.signal.reason);
    await appendFile(file, `${JSON.stringify({ ...execution, aborted: reason } satisfies ProbeTick)}\n`, { flag: "a" });
    throw error;
  }
}

/** Every tick (and abort line) probes with `tickMs` wrote next to the probe log `logFile`. */
export async function readProbeTicks(logFile: string): Promise<ProbeTick[]> {
  const text = await readFile(`${logFile}.ticks`, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return "";
    throw error;
  });
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as ProbeTick);
}

/** The built-in tools plus `probe` (idempotent), `probe_once` (not idempotent) and `probe_effect` (`probe_once` marking its effect's start). */
export function createProbeRegistry(options: { logFile?: string } = {}): ToolRegistry {
  return createToolRegistry([
    ...builtinTools,
    createProbeTool(options),
    createProbeTool({ ...options, name: "probe_once", idempotent: false }),
    createProbeTool({ ...options, name: "probe_effect", idempotent: false, marksEffectStart: true }),
  ]);
}

/** Every execution recorded in a probe log (an absent file means none yet). */
export async function readProbeLog(logFile: string): Promise<ProbeExecution[]> {
  const text = await readFile(logFile, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return "";
    throw error;
  });
  return text
    .split("\n")
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as ProbeExecution);
}

/** Executions grouped by step id. */
export function executionsByStep(executions: ProbeExecution[]): Map<string, ProbeExecution[]> {
  const byStep = new Map<string, ProbeExecution[]>();
  for (const execution of executions) {
    const list = byStep.get(execution.stepId) ?? [];
    list.push(execution);
    byStep.set(execution.stepId, list);
  }
  return byStep;
}

/**
 * What is wrong with a run's event numbering: it must be 1..N with no gap and no duplicate.
 * Returns the problems rather than asserting, so the probe worker process can import this file
 * without the test runner.
 */
export function sequenceProblems(events: StoredEvent[]): string[] {
  if (events.length === 0) return ["the stream has no events"];
  const problems: string[] = [];
  events.forEach((event, index) => {
    if (event.seq !== index + 1) problems.push(`event #${index + 1} has seq ${event.seq}`);
  });
  return problems.slice(0, 10);
}

/**
 * Replays a run's step events from `run.started` and lists every status change the state
 * machine's table refuses, so an engine path that skips a state (e.g. awaiting_approval →
 * running) fails the test that exercised it.
 */
export function illegalTransitions(events: StoredEvent[]): string[] {
  const started = events.find((event) => event.type === "run.started");
  if (!started) return ["the run has no run.started event"];
  const statuses = new Map<string, StepStatus>(
    started.type === "run.started" ? started.data.steps.map((step) => [step.id, step.status]) : [],
  );
  const illegal: string[] = [];
  for (const event of events) {
    const next = "status" in event.data ? (event.data.status as StepStatus) : undefined;
    if (!event.stepId || !next) continue;
    const previous = statuses.get(event.stepId);
    if (previous === undefined || !canTransition(previous, next)) {
      illegal.push(`#${event.seq} ${event.type} ${event.stepId}: ${previous ?? "?"} → ${next}`);
    }
    statuses.set(event.stepId, next);
  }
  return illegal;
}
