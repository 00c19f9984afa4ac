import pino from "pino";

/**
 * The one structured logger. Lines are JSON on stderr (stdout belongs to CLI output such as
 * `stepwise status --json`); a trace id, run id or plan id goes in as a field through
 * `logger.child({ traceId })`, so one id finds every line of a request. STEPWISE_LOG_LEVEL sets the
 * level (default `info`; `silent` in tests that want quiet).
 */
export const logger = pino(
  { level: process.env.STEPWISE_LOG_LEVEL ?? "info", base: { service: "stepwise" } },
  pino.destination(2),
);

export type Logger = typeof logger;
