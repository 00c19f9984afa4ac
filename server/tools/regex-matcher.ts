import { Worker } from "node:worker_threads";
import { AppError } from "../errors";

/**
 * Runs a user-supplied regular expression in a worker thread. A pattern like `(a+)+$` can
 * backtrack for minutes on one line, and JavaScript cannot interrupt a running match: in the
 * worker process's own thread it would freeze every step and request it serves. In a thread it
 * can be terminated when it exceeds its budget or the step is aborted.
 *
 * The source is inline (eval) so bundlers never need to locate a separate worker file.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require("node:worker_threads");
const pattern = new RegExp(workerData.pattern, workerData.flags);
parentPort.on("message", ({ text, limit }) => {
  const lines = text.split(/\\r?\\n/);
  const hits = [];
  for (let index = 0; index < lines.length && hits.length < limit; index++) {
    const column = lines[index].search(pattern);
    if (column >= 0) hits.push([index, column]);
  }
  parentPort.postMessage(hits);
});
`;

/** A 0-based line index and column. */
export type LineHit = [line: number, column: number];

export interface RegexMatcher {
  /** The first `limit` lines of `text` that match, each with the column of its first match. */
  matchLines(text: string, limit: number): Promise<LineHit[]>;
  close(): Promise<void>;
}

export function createRegexMatcher(
  pattern: string,
  flags: string,
  options: { budgetMs: number; signal: AbortSignal },
): RegexMatcher {
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { pattern, flags } });
  worker.unref();
  let closed = false;
  const close = async () => {
    if (closed) return;
    closed = true;
    await worker.terminate();
  };
  return {
    close,
    matchLines(text, limit) {
      options.signal.throwIfAborted();
      return new Promise<LineHit[]>((resolve, reject) => {
        const cleanup = () => {
          clearTimeout(timer);
          options.signal.removeEventListener("abort", onAbort);
          worker.off("message", onMessage);
          worker.off("error", onError);
        };
        const fail = (error: unknown) => {
          cleanup();
          void close();
          reject(error);
        };
        const onMessage = (hits: LineHit[]) => {
          cleanup();
          resolve(hits);
        };
        const onError = (error: Error) => fail(error);
        const onAbort = () => fail(options.signal.reason);
        const timer = setTimeout(
          () =>
            fail(
              new AppError(
                "invalid_input",
                `The regular expression took over ${options.budgetMs} ms on one file and was stopped; ` +
                  "simplify it (nested quantifiers such as (a+)+ backtrack catastrophically)",
              ),
            ),
          options.budgetMs,
        );
        options.signal.addEventListener("abort", onAbort, { once: true });
        worker.on("message", onMessage);
        worker.on("error", onError);
        worker.postMessage({ text, limit });
      });
    },
  };
}
