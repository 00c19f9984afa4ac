import pino from "pino";

/**
 * The one structured logger, on stderr (stdout belongs to CLI output such as `stepwise status
 * --json`); a trace id, run id or plan id goes in as a field through `logger.child({ traceId })`,
 * so one id finds every line of a request. STEPWISE_LOG_LEVEL sets the level (default `info`;
 * `silent` in tests that want quiet).
 *
 * In a terminal the lines are for a person: one short line each (time, level, component, message,
 * fields). Anywhere else — a pipe, a file, a log collector — they are JSON, one object per line.
 * STEPWISE_LOG_FORMAT=json or =text chooses explicitly.
 */
export type LogFormat = "json" | "text";

export function logFormat(
  env: Record<string, string | undefined> = process.env,
  terminal = process.stderr.isTTY === true,
): LogFormat {
  if (env.STEPWISE_LOG_FORMAT === "json" || env.STEPWISE_LOG_FORMAT === "text") return env.STEPWISE_LOG_FORMAT;
  return terminal ? "text" : "json";
}

const LEVEL_NAMES: Record<number, string> = {
  10: "trace",
  20: "debug",
  30: "info",
  40: "warn",
  50: "error",
  60: "fatal",
};
const HIDDEN = new Set(["level", "time", "msg", "service", "pid", "hostname", "component", "err"]);

/** One JSON log line as a person reads it: `12:03:04 warn worker: message (key=value …)`. */
export function formatLogLine(json: string): string {
  let entry: Record<string, unknown>;
  try {
    entry = JSON.parse(json) as Record<string, unknown>;
  } catch {
    return json.endsWith("\n") ? json : `${json}\n`;
  }
  const time = new Date(typeof entry.time === "number" ? entry.time : Date.now()).toTimeString().slice(0, 8);
  const level = LEVEL_NAMES[entry.level as number] ?? String(entry.level);
  const component = typeof entry.component === "string" ? ` ${entry.component}:` : "";
  const fields = Object.entries(entry)
    .filter(([key]) => !HIDDEN.has(key))
    .map(([key, value]) => `${key}=${typeof value === "string" ? value : JSON.stringify(value)}`);
  const err = entry.err as { type?: string; message?: string } | undefined;
  const error = err ? ` — ${err.type ?? "Error"}: ${err.message ?? ""}` : "";
  return `${time} ${level}${component} ${String(entry.msg ?? "")}${error}${fields.length ? ` (${fields.join(", ")})` : ""}\n`;
}

/**
 * After Ctrl-C, only errors are worth a line: the person asked to stop and was told so. Kept on
 * globalThis because Next.js bundles its own copy of this module into the same process.
 */
const QUIET = Symbol.for("stepwise.logger.quietForShutdown");
const shared = globalThis as typeof globalThis & { [QUIET]?: boolean };
export function quietForShutdown(): void {
  shared[QUIET] = true;
}

export const logger = pino(
  {
    level: process.env.STEPWISE_LOG_LEVEL ?? "info",
    base: { service: "stepwise" },
    hooks: {
      // Inherited by every child logger, unlike a level changed later.
      logMethod(args, method, level) {
        if (shared[QUIET] && level < 50) return;
        method.apply(this, args);
      },
    },
  },
  logFormat() === "text" ? { write: (line: string) => process.stderr.write(formatLogLine(line)) } : pino.destination(2),
);

export type Logger = typeof logger;
