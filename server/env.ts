import path from "node:path";

/** Configuration read once from the environment; every knob a user can turn is listed here. */
export interface AppConfig {
  /** External PostgreSQL; when absent an embedded server is started. */
  databaseUrl: string | undefined;
  /** Where the embedded database and other local state live. */
  dataDir: string;
  /** Port of the embedded PostgreSQL (an unusual one: 5432 is often taken). */
  embeddedPgPort: number;
  host: string;
  port: number;
  /** Directory registered as the default workspace. */
  workspaceDir: string;
  /** Steps a worker process executes at once. */
  workerConcurrency: number;
  /** Run workers inside the web process. */
  inProcessWorker: boolean;
  /**
   * The scheduling niceness a `stepwise worker` process takes (0–19, 0 leaves it as it is): beside
   * the web server on one machine, the process people watch gets the CPU first.
   */
  workerNice: number;
  accessToken: string | undefined;
  /** The hostname users reach this server by, besides loopback names (behind a proxy, say). */
  publicHost: string | undefined;
  /**
   * PostgreSQL ends a session that sits this long inside a transaction without a statement, so a
   * frozen worker (SIGSTOP, a stalled VM) cannot hold a run's locks for ever.
   */
  idleInTransactionMs: number;
  /** Finished runs' events and step logs are removed this many days after they finished; off when undefined. */
  retentionDays: number | undefined;
}

export function intFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value <= 0) {
    throw new Error(`${name} must be a positive integer, got "${raw}"`);
  }
  return value;
}

export function readConfig(): AppConfig {
  // These are the person's folders, read at run time — never files of the app. Next.js bundles
  // this module (through app-context) and, seeing a path built from the environment, would trace
  // and ship the whole project as if the app needed every file in it; the comments tell it not to.
  const dataDir = path.resolve(/*turbopackIgnore: true*/ process.env.STEPWISE_DATA_DIR ?? "data");
  return {
    databaseUrl: process.env.DATABASE_URL || undefined,
    dataDir,
    embeddedPgPort: intFromEnv("STEPWISE_PG_PORT", 54329),
    host: process.env.HOST ?? "127.0.0.1",
    port: intFromEnv("PORT", 3000),
    // Not the current directory: that is usually the Stepwise checkout, and a first write_file
    // would write into the repository. The data folder is already private and gitignored.
    workspaceDir: path.resolve(
      /*turbopackIgnore: true*/ process.env.STEPWISE_WORKSPACE ??
        path.join(/*turbopackIgnore: true*/ dataDir, "workspace"),
    ),
    workerConcurrency: intFromEnv("STEPWISE_WORKER_CONCURRENCY", 16),
    inProcessWorker: process.env.STEPWISE_IN_PROCESS_WORKER !== "0",
    workerNice: niceFromEnv("STEPWISE_WORKER_NICE", 10),
    accessToken: process.env.STEPWISE_ACCESS_TOKEN || undefined,
    publicHost: process.env.STEPWISE_PUBLIC_HOST || undefined,
    idleInTransactionMs: idleInTransactionMs(),
    retentionDays: retentionDays(),
  };
}

/**
 * The address people open this server at, for links that leave it (webhooks):
 * STEPWISE_PUBLIC_URL, else http://<STEPWISE_PUBLIC_HOST or HOST>:<PORT>.
 */
export function publicBaseUrl(config: AppConfig = readConfig()): string {
  const explicit = process.env.STEPWISE_PUBLIC_URL?.trim();
  if (explicit) return explicit.replace(/\/+$/, "");
  const host = config.publicHost ?? config.host;
  return `http://${host.includes(":") ? `[${host}]` : host}:${config.port}`;
}

/** A niceness, 0 (unchanged) to 19 (yields the most). */
export function niceFromEnv(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === "") return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0 || value > 19) {
    throw new Error(`${name} must be a whole number from 0 to 19, got "${raw}"`);
  }
  return value;
}

/** STEPWISE_IDLE_IN_TRANSACTION_MS, read where pools are made (workers have no full config). */
export function idleInTransactionMs(): number {
  return intFromEnv("STEPWISE_IDLE_IN_TRANSACTION_MS", 15_000);
}

/**
 * STEPWISE_RETENTION_DAYS: a finished run's events and step logs are removed once it finished this
 * many days ago (server/ops/retention.ts). Unset, empty, "0" or "off": kept for ever (the default).
 */
export function retentionDays(): number | undefined {
  const raw = process.env.STEPWISE_RETENTION_DAYS?.trim();
  if (raw === undefined || raw === "" || raw === "0" || raw.toLowerCase() === "off") return undefined;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) {
    throw new Error(`STEPWISE_RETENTION_DAYS must be a number of days (or "off"), got "${raw}"`);
  }
  return value;
}
