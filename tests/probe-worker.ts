/**
 * A worker process for fault and distribution tests: `stepwise worker` with the built-in tools
 * plus the probe, against DATABASE_URL.
 *
 *   DATABASE_URL=… STEPWISE_PROBE_LOG=/tmp/probe.log STEPWISE_HEARTBEAT_MS=200 \
 *     node --import tsx tests/probe-worker.ts
 *
 * (Under the integration tests' global setup it runs from the run's bundle instead:
 * tests/program-command.ts.)
 *
 * It prints `ready <pid>` once it has registered in `workers` and is taking jobs, so a test can
 * wait for that instead of sleeping. Tests start it with `spawnProbeWorker`.
 *
 * With STEPWISE_PROBE_STALL=1 it is instead a worker frozen at the worst moment: it takes step
 * jobs off the queue (graphile-worker locks them) but never claims them, as a worker does while
 * it waits for a run's lock. Killing it then leaves jobs locked by a dead process.
 *
 * With STEPWISE_PROBE_FREEZE_RUN=<run id> it stops itself (SIGSTOP) inside the transaction that
 * records the first outcome of that run, holding the run's lock, after printing `frozen <run id>`:
 * a worker process frozen mid-transaction. SIGCONT lets it go on.
 *
 * With STEPWISE_PROBE_SKIP_LEASE_RENEWAL=1 it heartbeats but never renews the leases of the
 * attempts it runs: a live worker that has lost hold of its steps.
 *
 * `spawnProbeWorker({ clockOffset: "+10m" })` runs it with its wall clock shifted by libfaketime
 * (preloaded into the process itself, so the pid is the worker's); its timers are unaffected.
 */
import { spawn, type ChildProcess } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Logger, run as runGraphileWorker } from "graphile-worker";
import { createAppContext } from "../server/app-context";
import { connectDatabase } from "../server/db";
import { createEngineDeps } from "../server/engine/engine";
import { RUN_STEP_TASK } from "../server/queue/jobs";
import { startStepWorker } from "../server/engine/worker";
import { createProbeRegistry, PROBE_LOG_ENV } from "./probe-tool";
import { programCommand } from "./program-command";

const READY_PREFIX = "ready ";
const FROZEN_PREFIX = "frozen ";
/** libfaketime as Debian and Ubuntu install it (package `faketime`). */
export const LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1";
const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");

export interface ProbeWorkerProcess {
  child: ChildProcess;
  pid: number;
  /** Resolves once the worker is taking jobs; rejects if it exits first (or outlasts readyTimeoutMs, if given). */
  ready: Promise<void>;
  /** Resolves when the process has exited, whatever the reason. */
  exited: Promise<void>;
  /** SIGKILL: no shutdown handler runs, in-flight steps are left `running`. */
  kill(): Promise<void>;
  /** SIGTERM: a clean stop (jobs finish, the worker row is marked stopped). */
  stop(): Promise<void>;
  /** Everything it printed so far. */
  output(): string;
}

export function spawnProbeWorker(options: {
  databaseUrl: string;
  probeLog: string;
  workspace: string;
  heartbeatMs?: number;
  concurrency?: number;
  readyTimeoutMs?: number;
  /** Take step jobs off the queue but never claim them (see the file comment). */
  stallClaims?: boolean;
  /** Freeze (SIGSTOP itself) inside the transaction recording this run's first outcome. */
  freezeRun?: string;
  /** Its pools' STEPWISE_IDLE_IN_TRANSACTION_MS. */
  idleInTransactionMs?: number;
  /** Beat, but never renew the leases of running attempts. */
  skipLeaseRenewal?: boolean;
  /** Shift the process's wall clock by this libfaketime offset, e.g. "+10m" or "-10m". */
  clockOffset?: string;
}): ProbeWorkerProcess {
  const [command, ...args] = programCommand("tests/probe-worker.ts");
  const child = spawn(command!, args, {
    cwd: projectRoot,
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      STEPWISE_WORKSPACE: options.workspace,
      [PROBE_LOG_ENV]: options.probeLog,
      STEPWISE_HEARTBEAT_MS: String(options.heartbeatMs ?? 200),
      STEPWISE_WORKER_CONCURRENCY: String(options.concurrency ?? 4),
      STEPWISE_PROBE_STALL: options.stallClaims ? "1" : "0",
      STEPWISE_PROBE_FREEZE_RUN: options.freezeRun ?? "",
      STEPWISE_PROBE_SKIP_LEASE_RENEWAL: options.skipLeaseRenewal ? "1" : "0",
      ...(options.idleInTransactionMs && { STEPWISE_IDLE_IN_TRANSACTION_MS: String(options.idleInTransactionMs) }),
      ...(options.clockOffset && {
        LD_PRELOAD: LIBFAKETIME,
        FAKETIME: options.clockOffset,
        FAKETIME_DONT_FAKE_MONOTONIC: "1",
      }),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  // No deadline of its own unless asked: the process compiles the server with tsx as it starts,
  // which took 2.5 min at load 40 on 2 cores (30 s and then 100 s deadlines both ran out). The
  // test waits for its `ready` line however long that takes; the test's timeout is the backstop.
  const ready = new Promise<void>((resolve, reject) => {
    const timer =
      options.readyTimeoutMs === undefined
        ? undefined
        : setTimeout(
            () => reject(new Error(`probe worker not ready after ${options.readyTimeoutMs} ms:\n${output}`)),
            options.readyTimeoutMs,
          );
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.split("\n").some((line) => line.startsWith(READY_PREFIX))) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on("data", onData);
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.once("exit", (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`probe worker exited (${code ?? signal}) before it was ready:\n${output}`));
    });
  });
  // Readiness is awaited by the test; an exit after that must not become an unhandled rejection.
  ready.catch(() => undefined);
  const signal = async (name: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(name);
    await exited;
  };
  return {
    child,
    pid: child.pid!,
    ready,
    exited,
    kill: () => signal("SIGKILL"),
    stop: () => signal("SIGTERM"),
    output: () => output,
  };
}

async function main(): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("DATABASE_URL is required");
  if (!process.env[PROBE_LOG_ENV]) throw new Error(`${PROBE_LOG_ENV} is required`);
  const concurrency = Number(process.env.STEPWISE_WORKER_CONCURRENCY ?? 4);
  if (process.env.STEPWISE_PROBE_STALL === "1") {
    await runGraphileWorker({
      connectionString: databaseUrl,
      concurrency,
      noHandleSignals: true,
      pollInterval: 250,
      logger: new Logger(() => () => undefined),
      taskList: { [RUN_STEP_TASK]: () => new Promise<void>(() => undefined) },
    });
    process.stdout.write(`${READY_PREFIX}${process.pid}\n`);
    return;
  }
  const freezeRun = process.env.STEPWISE_PROBE_FREEZE_RUN;
  const skipLeaseRenewal = process.env.STEPWISE_PROBE_SKIP_LEASE_RENEWAL === "1";
  if (freezeRun || skipLeaseRenewal) {
    const db = connectDatabase(databaseUrl);
    const engine = createEngineDeps(db.pool, createProbeRegistry());
    let frozen = false;
    engine.beforeCommit = (runId, ops) => {
      if (frozen || !freezeRun || runId !== freezeRun || !ops.some((op) => op.kind === "record")) return;
      frozen = true;
      // Pipes are written synchronously on Linux: the line is out before the process stops.
      process.stdout.write(`${FROZEN_PREFIX}${runId}\n`);
      process.kill(process.pid, "SIGSTOP");
    };
    await startStepWorker(engine, { databaseUrl, concurrency, skipLeaseRenewal });
    process.stdout.write(`${READY_PREFIX}${process.pid}\n`);
    return;
  }
  const context = await createAppContext({
    databaseUrl,
    workspaceRoot: process.env.STEPWISE_WORKSPACE ?? process.cwd(),
    worker: { concurrency },
    tools: createProbeRegistry(),
  });
  let stopping = false;
  process.on("SIGTERM", () => {
    if (stopping) return;
    stopping = true;
    context.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  });
  process.stdout.write(`${READY_PREFIX}${process.pid}\n`);
}

/** Started as a program (from source, or as the bundle's `probe-worker.mjs`), not imported by a test. */
const startedAsProgram = /^probe-worker\.[mc]?[jt]s$/.test(path.basename(process.argv[1] ?? ""));
if (startedAsProgram) {
  main().catch((error: unknown) => {
    console.error(`[probe-worker] ${error instanceof Error ? error.stack : String(error)}`);
    process.exit(1);
  });
}
