import { logger } from "../logger";

/**
 * The forker: a small Node process of Stepwise's own that starts, on the launcher's behalf
 * (launcher.ts, `launchForOutput`), the short programs whose output is read whole — every git.
 * The launcher starts the forker itself, like any program (`createForker`'s `start`); this module
 * is its code and the client that talks to it.
 *
 * Why: Node starts a program by forking the process that asks, and the kernel copies that
 * process's page tables while its event loop waits. For a server of 300 MB that is 10–20 ms per
 * program, during which no call is answered; an agent's DONE in a git workspace starts two or
 * three. Forked from a process of 40 MB the copy is a few ms, and it holds only the forker.
 *
 * What it may run is decided before it is asked: the launcher hands it the finished command line
 * (the sandbox's bwrap, or an approved argv), the whole environment and the directory. It adds
 * nothing, reads no workspace and decides nothing. Its programs die with it (bwrap's
 * --die-with-parent; it kills the rest when its channel closes), and it dies with Stepwise: it
 * exits when the channel to the process that started it closes, however that one ended.
 */

/** What to keep of a program's output, and where its pipes close (the program then fails to write: EPIPE). */
export interface CollectLimits {
  /** Bytes of stdout kept; `false`: stdout is not read at all ("ignore"). */
  stdoutBytes: number | false;
  /** Bytes of stderr kept; `false`: not read. */
  stderrBytes: number | false;
  /** Past this many bytes on one stream, its pipe is closed. */
  closeAfterBytes: number;
}

export interface CollectedOutput {
  stdout: Buffer;
  stderr: Buffer;
  /** Whether more stdout came than was kept. */
  stdoutTruncated: boolean;
  exitCode: number | null;
  signal: NodeJS.Signals | null;
}

export interface ProgramRequest {
  command: string;
  args: string[];
  env: Record<string, string>;
  cwd?: string;
}

export type FromForker =
  | { t: "error"; id: number; code?: string; message: string }
  | {
      t: "close";
      id: number;
      code: number | null;
      signal: NodeJS.Signals | null;
      stdout: Uint8Array;
      stderr: Uint8Array;
      stdoutTruncated: boolean;
    };

/**
 * The forker's own code, run with `node -e` so it needs no file of its own wherever Stepwise is
 * bundled. Plain CommonJS: no loader, no project import.
 */
export const FORKER_SOURCE = String.raw`
"use strict";
const { spawn } = require("node:child_process");
const running = new Map();
process.on("disconnect", () => {
  for (const child of running.values()) { try { child.kill("SIGKILL"); } catch {} }
  process.exit(0);
});
process.on("message", (m) => {
  if (m.t === "kill") { const child = running.get(m.id); if (child) child.kill(m.signal); return; }
  let child;
  try {
    child = spawn(m.command, m.args, {
      cwd: m.cwd, env: m.env,
      stdio: ["ignore", m.limits.stdoutBytes === false ? "ignore" : "pipe", m.limits.stderrBytes === false ? "ignore" : "pipe"],
    });
  } catch (error) {
    process.send({ t: "error", id: m.id, code: error.code, message: error.message });
    return;
  }
  running.set(m.id, child);
  const kept = [[], []], sizes = [0, 0], seen = [0, 0], keep = [m.limits.stdoutBytes, m.limits.stderrBytes];
  [child.stdout, child.stderr].forEach((stream, i) => {
    if (!stream) return;
    stream.on("data", (chunk) => {
      seen[i] += chunk.length;
      if (sizes[i] < keep[i]) {
        const part = chunk.subarray(0, keep[i] - sizes[i]);
        kept[i].push(part);
        sizes[i] += part.length;
      }
      if (seen[i] > m.limits.closeAfterBytes) stream.destroy();
    });
  });
  let failed = false;
  child.on("error", (error) => {
    failed = true;
    running.delete(m.id);
    process.send({ t: "error", id: m.id, code: error.code, message: error.message });
  });
  child.on("close", (code, signal) => {
    running.delete(m.id);
    if (failed) return;
    process.send({
      t: "close", id: m.id, code, signal,
      stdout: Buffer.concat(kept[0]), stderr: Buffer.concat(kept[1]), stdoutTruncated: seen[0] > sizes[0],
    });
  });
});
`;

interface Pending {
  resolve: (output: CollectedOutput) => void;
  reject: (error: Error) => void;
}

/**
 * What the client needs of the forker's process (a `ChildProcess` started with an IPC channel and
 * `serialization: "advanced"`), named here so that only the launcher deals in processes.
 */
export interface ForkerProcess {
  readonly connected: boolean;
  readonly channel?: { ref?: () => void; unref?: () => void } | null;
  send(message: unknown): boolean;
  on(event: "message", listener: (message: FromForker) => void): this;
  on(event: "error", listener: (error: Error) => void): this;
  on(event: "exit", listener: (code: number | null, signal: NodeJS.Signals | null) => void): this;
  ref(): void;
  unref(): void;
}

/** A forker and what it was asked and has not answered (its own: a forker's end fails only those). */
interface Forker {
  child: ForkerProcess;
  pending: Map<number, Pending>;
}

/** Runs a finished command line in the forker and collects its output as `limits` says. */
export type CollectOutput = (
  request: ProgramRequest,
  limits: CollectLimits,
  signal?: AbortSignal,
) => Promise<CollectedOutput>;

/**
 * The client of one forker at a time: `start` starts a forker (the launcher does, running
 * `FORKER_SOURCE`), the first time and again after one ended.
 */
export function createForker(start: () => ForkerProcess): CollectOutput {
  let forker: Forker | undefined;
  let nextId = 1;

  function startForker(): Forker {
    const started: Forker = { child: start(), pending: new Map() };
    const { child, pending } = started;
    child.on("message", (message: FromForker) => {
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      if (message.t === "error") {
        waiting.reject(Object.assign(new Error(message.message), { code: message.code }));
      } else {
        waiting.resolve({
          stdout: Buffer.from(message.stdout.buffer, message.stdout.byteOffset, message.stdout.byteLength),
          stderr: Buffer.from(message.stderr.buffer, message.stderr.byteOffset, message.stderr.byteLength),
          stdoutTruncated: message.stdoutTruncated,
          exitCode: message.code,
          signal: message.signal,
        });
      }
      if (pending.size === 0) idle(child);
    });
    const lost = (why: string) => {
      if (forker === started) forker = undefined;
      const error = new Error(`The forker ended (${why}); the program's outcome is unknown`);
      for (const [id, waiting] of pending) {
        pending.delete(id);
        waiting.reject(error);
      }
    };
    child.on("error", (error) => lost(error.message));
    child.on("exit", (code, signal) => {
      if (pending.size > 0) logger.warn({ code, signal }, "the forker ended with programs running");
      lost(signal ?? `exit ${code}`);
    });
    return started;
  }

  return (request, limits, signal) => {
    if (signal?.aborted) return Promise.reject(signal.reason as Error);
    if (!forker?.child.connected) forker = startForker();
    const { child, pending } = forker;
    const id = nextId++;
    return new Promise<CollectedOutput>((resolve, reject) => {
      const onAbort = () => child.connected && child.send({ t: "kill", id, signal: "SIGTERM" });
      signal?.addEventListener("abort", onAbort, { once: true });
      const settle = () => signal?.removeEventListener("abort", onAbort);
      pending.set(id, {
        resolve: (output) => {
          settle();
          if (signal?.aborted) reject(signal.reason as Error);
          else resolve(output);
        },
        reject: (error) => {
          settle();
          reject(signal?.aborted ? (signal.reason as Error) : error);
        },
      });
      busy(child);
      child.send({ t: "run", id, ...request, limits });
    });
  };
}

/** Nothing asked of it: it does not keep Stepwise (or a test) running. */
function idle(child: ForkerProcess): void {
  child.unref();
  child.channel?.unref?.();
}

function busy(child: ForkerProcess): void {
  child.ref();
  child.channel?.ref?.();
}
