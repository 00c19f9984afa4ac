/**
 * The long-running commands: `serve` (database, app context, Next.js), `worker` (steps only) and
 * `migrate`. Each owns its process: it starts what it needs and stops it in order on a signal.
 */
import os from "node:os";
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { createAppContext, installAppContext } from "../app-context";
import { migrateDatabase, openDatabase } from "./bootstrap";
import { assertNoOtherStepwise, runningEmbeddedDatabaseUrl, takeOverShutdownSignals } from "../db/embedded";
import { readConfig } from "../env";
import { doorConfig, generateAccessToken } from "../http/door";
import { behindDoor, keepIdleConnections } from "../http/door-server";
import { principalNameTaken, resolveCredential } from "../people/principals";
import { attachLiveSocket } from "../http/live-socket";
import { logger, quietForShutdown } from "../logger";
import { startTelemetry } from "../telemetry";
import { resolvePersonAccess, signInLink, type PersonAccess } from "./access-token";
import { processAlive, readConnectionFile, removeConnectionFile, writeConnectionFile } from "./connection-file";
import { portError } from "./preflight";

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
/**
 * The startup and shutdown lines a person reads in the terminal (where it listens, how to sign in),
 * on stdout as plain text — deliberately not the JSON logger on stderr.
 */
// eslint-disable-next-line no-console -- the deliberate human output of `stepwise serve`
export const log = (line: string) => console.log(`[stepwise] ${line}`);

/** Copies of one signal arrive within this time of each other; a real second press comes later. */
export const REPEATED_SIGNAL_MS = 1_000;

/** How long a shutdown may take in all: the steps' grace period, then 30 s to let go of the rest. */
const SHUTDOWN_DEADLINE_MS = Number(process.env.STEPWISE_SHUTDOWN_GRACE_MS ?? 10_000) + 30_000;

/** Stops everything once on SIGINT/SIGTERM, so the embedded database shuts down cleanly. */
function onShutdown(stop: () => Promise<void>): void {
  let stoppingSince: number | undefined;
  const handler = (signal: string) => {
    if (stoppingSince !== undefined) {
      // One Ctrl-C reaches this process more than once (from the terminal, and relayed by npm and
      // tsx): only a signal that comes later is the person's second press.
      if (Date.now() - stoppingSince < REPEATED_SIGNAL_MS) return;
      // A second signal means "now": in-flight steps are left to recovery as interrupted.
      log(`${signal} again: exiting now`);
      process.exit(130);
    }
    stoppingSince = Date.now();
    log(`${signal}: shutting down…`);
    // That line is the whole answer to Ctrl-C: what stopping does (steps aborted after the grace
    // period, connections closed) is expected, not news; errors still print.
    quietForShutdown();
    // Ctrl-C always ends Stepwise: should a part hang while letting go, the process exits anyway
    // once running steps had their grace and the rest a generous margin; the exit hook still
    // stops the embedded database cleanly, and interrupted steps go to recovery.
    setTimeout(() => {
      log(`${signal}: shutdown did not finish in ${Math.round(SHUTDOWN_DEADLINE_MS / 1000)} s; exiting now`);
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS).unref();
    stop()
      .then(() => process.exit(0))
      .catch((error) => {
        logger.error({ err: error }, "shutdown failed");
        process.exit(1);
      });
  };
  takeOverShutdownSignals(handler);
}

export async function serve(dev: boolean): Promise<void> {
  const config = readConfig();
  const telemetry = startTelemetry();
  // The CLI's credential: an agent identity on the operations API, handed over in server.json.
  const agentToken = process.env.STEPWISE_AGENT_TOKEN || generateAccessToken();
  // The settings, the data folder and the web port were checked before this module was even
  // loaded (preflight.ts, run by main.ts), so a bad setting is reported within seconds.
  // Every request needs the person's token, loopback included, unless explicitly trusted.
  const access = await resolvePersonAccess({
    dataDir: config.dataDir,
    host: config.host,
    configuredToken: config.accessToken,
    trustLocal: process.env.STEPWISE_TRUST_LOCAL === "1",
  });
  const door = doorConfig({
    host: config.host,
    publicHost: config.publicHost,
    accessToken: access.token,
    agentToken,
    // A Prometheus scraper's own credential: it opens GET /metrics and nothing else.
    metricsToken: process.env.STEPWISE_METRICS_TOKEN || undefined,
  });
  const database = await openDatabase(config, log);
  const contextPromise = createAppContext({
    databaseUrl: database.databaseUrl,
    workspaceRoot: config.workspaceDir,
    worker: config.inProcessWorker ? { concurrency: config.workerConcurrency } : false,
  });
  installAppContext(contextPromise);
  const context = await contextPromise;
  // People's and named agents' own credentials, looked up in the database by their hash.
  door.principals = (presented) => resolveCredential(context.db.pool, presented);
  door.nameIsTaken = (name) => principalNameTaken(context.db.pool, name);
  const { default: next } = await import("next");
  const app = next({ dev, dir: projectRoot, hostname: config.host, port: config.port });
  await app.prepare();
  const handle = app.getRequestHandler();
  const server = createServer(behindDoor((req, res) => void handle(req, res), door));
  keepIdleConnections(server);
  const liveSocket = attachLiveSocket(server, {
    door,
    app: context,
    otherUpgrades: dev ? app.getUpgradeHandler() : undefined,
  });
  try {
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(config.port, config.host, resolve);
    });
  } catch (error) {
    // Taken since the check: stop what this process started instead of hanging with it running.
    await app.close?.();
    await context.close();
    await database.stop();
    throw portError(error, config.port);
  }
  const localHost = ["0.0.0.0", "::"].includes(config.host) ? "127.0.0.1" : config.host;
  await writeConnectionFile(config.dataDir, {
    url: `http://${hostForUrl(localHost)}:${config.port}`,
    token: agentToken,
    pid: process.pid,
  });
  // Before "Ready": whoever reads that line may press Ctrl-C at once.
  onShutdown(async () => {
    await removeConnectionFile(config.dataDir);
    liveSocket.close();
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await app.close?.();
    await context.close();
    await database.stop();
    await telemetry?.shutdown();
  });
  log(`Database: ${database.embedded ? "embedded PostgreSQL" : "DATABASE_URL"}; workspace: ${config.workspaceDir}`);
  log(`Ready on http://${config.host}:${config.port}`);
  announceSignIn(access, `http://${config.publicHost ?? hostForUrl(localHost)}:${config.port}`);
}

function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** How the person gets in: the sign-in link, printed once at every start, or the opt-out's warning. */
function announceSignIn(access: PersonAccess, baseUrl: string): void {
  if (access.kind === "trust-local") {
    log("STEPWISE_TRUST_LOCAL=1: no access token; every local process and page on this machine acts as you.");
    return;
  }
  if (access.kind === "configured") {
    log(`Sign in with STEPWISE_ACCESS_TOKEN at ${baseUrl}/sign-in`);
    return;
  }
  const made = access.created ? "made and stored" : "stored";
  log(`Open this link to sign in (access token ${made} in ${access.file}):`);
  log(`    ${signInLink(baseUrl, access.token)}`);
}

export async function worker(options: { workspaces?: string[] } = {}): Promise<void> {
  const config = readConfig();
  const telemetry = startTelemetry();
  // Without DATABASE_URL, join the `npm start` running from this data folder on its embedded
  // PostgreSQL: its socket and the app role's password (pg-secret) are readable by this user only.
  const running = config.databaseUrl ? undefined : await readConnectionFile(config.dataDir);
  const joinUrl = running && processAlive(running.pid) ? await runningEmbeddedDatabaseUrl(config.dataDir) : undefined;
  if (running && joinUrl) {
    log(`Joining the running Stepwise (pid ${running.pid}) on its embedded PostgreSQL`);
    config.databaseUrl = joinUrl;
  }
  if (!config.databaseUrl) await assertNoOtherStepwise(config.dataDir, log);
  const database = await openDatabase(config, log);
  const nice = yieldCpu(config.workerNice);
  const context = await createAppContext({
    databaseUrl: database.databaseUrl,
    workspaceRoot: config.workspaceDir,
    worker: { concurrency: config.workerConcurrency, workspaces: options.workspaces },
  });
  onShutdown(async () => {
    await context.close();
    await database.stop();
    await telemetry?.shutdown();
  });
  const served = context.worker?.servedWorkspaces() ?? [];
  log(`Worker started (concurrency ${config.workerConcurrency}, nice ${nice})`);
  log(
    served.length > 0
      ? `Serving ${served.length === 1 ? "workspace" : "workspaces"} ${served.join(", ")} (and steps that touch none)`
      : "Serving no workspace: only steps that touch none (see --workspace)",
  );
}

/**
 * A worker process gives the CPU to the web server beside it: under load (two workers, five live
 * subscribers, two cores) the subscribers' delivery p99 went from ~310 to ~200 ms at nice 10 while
 * the workers' makespan did not grow — they mostly wait for the database. Only ever raised: an
 * unprivileged process may not lower it, and one started with `nice` keeps what it was given.
 * Set after the embedded database (if any) started, so PostgreSQL keeps normal priority.
 */
function yieldCpu(nice: number): number {
  const current = os.getPriority();
  if (nice <= current) return current;
  try {
    os.setPriority(nice);
    return nice;
  } catch {
    return current;
  }
}

export async function migrate(): Promise<void> {
  const config = readConfig();
  if (config.databaseUrl) {
    await migrateDatabase(config.databaseUrl, log);
  } else {
    const database = await openDatabase(config, log);
    await database.stop();
  }
  log("Database is up to date");
}
