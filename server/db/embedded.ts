import fsSync from "node:fs";
import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { launch, type LaunchedProcess } from "../launcher/launcher";
import {
  APP_ROLE,
  LEGACY_PASSWORD,
  readOrCreateSecret,
  SECRET_FILE,
  socketUrl,
  SUPERUSER,
  tcpUrl,
} from "./embedded-credentials";
import {
  hbaConfig,
  hydrateNativeSymlinks,
  letPostgresUserReach,
  nativePackageDir,
  postgresUser,
  socketDirectory,
} from "./embedded-host";
import { initialiseCluster } from "./embedded-cluster";
import { anotherStepwiseError, isOrphan, runningPostmaster } from "./embedded-postmaster";
import { connectAsSuperuser, ensureAppDatabase, ensureAppRole } from "./embedded-roles";

export { APP_ROLE, runningEmbeddedDatabaseUrl, SECRET_FILE } from "./embedded-credentials";
export { letPostgresUserReach } from "./embedded-host";
export { runningPostmaster, type RunningPostmaster } from "./embedded-postmaster";

/**
 * From the moment this module is loaded until `takeOverShutdownSignals`, SIGINT, SIGTERM and SIGHUP
 * end the process through `process.exit`, so the exit hook of a database it already started still
 * stops that database (a signal's default action ends the process without running any hook, and
 * the postmaster, in a session of its own, would outlive it).
 */
const EARLY_EXIT_CODES: Partial<Record<NodeJS.Signals, number>> = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 };
const earlyExits = new Map<NodeJS.Signals, () => void>();
for (const [signal, code] of Object.entries(EARLY_EXIT_CODES) as [NodeJS.Signals, number][]) {
  const exit = () => process.exit(code);
  earlyExits.set(signal, exit);
  process.on(signal, exit);
}

/**
 * Hands SIGINT and SIGTERM (or `signals`) to `handle`, which stops the server, workers, pools and
 * then the database in order, and gives the others their default action back.
 *
 * `handle` is added before the early exits are removed, never after: Node closes a signal's
 * watcher when its last listener goes, and a signal that arrived just before (a Ctrl-C sent the
 * moment "Ready" was printed) is queued for that closed watcher and lost — the process then
 * ignores the Ctrl-C it was given. Added first, the watcher stays and the queued signal reaches
 * `handle`.
 */
export function takeOverShutdownSignals(
  handle: (signal: NodeJS.Signals) => void,
  signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM"],
): void {
  for (const signal of signals) process.on(signal, () => handle(signal));
  for (const [signal, exit] of earlyExits) process.off(signal, exit);
  earlyExits.clear();
}

export interface EmbeddedDatabase {
  /** The superuser's URL of the `postgres` maintenance database: administration only. */
  serverUrl: string;
  /** What the app connects with: the non-superuser role that owns `database`. */
  databaseUrl: string;
  /** The postmaster's pid. */
  pid: number;
  stop(): Promise<void>;
}

/** What PostgreSQL writes while running, for the error message when it does not start. */
const LOG_FILE = "pg.log";

export async function findFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() =>
        typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port")),
      );
    });
  });
}

/** Room for several Stepwise processes on one embedded database (see startEmbeddedPostgres). */
export const EMBEDDED_MAX_CONNECTIONS = 300;

/**
 * Refuses to start when another Stepwise's embedded PostgreSQL is serving this data folder, with
 * the message a person needs rather than PostgreSQL's lock error: the Stepwise process and its web
 * address, not PostgreSQL's. A PostgreSQL left behind by a Stepwise that was killed outright is
 * stopped instead, and the start goes on.
 */
export async function assertNoOtherStepwise(
  dataDir: string,
  log: (line: string) => void = () => undefined,
): Promise<void> {
  const databaseDir = path.resolve(dataDir, "pg");
  const running = await runningPostmaster(databaseDir);
  if (!running) return;
  if (isOrphan(running)) {
    log(`Stopping the embedded PostgreSQL (pid ${running.pid}) left running by a Stepwise that did not shut down`);
    await stopPostmaster(running.pid);
    return;
  }
  throw await anotherStepwiseError(running, dataDir);
}

/** Asks a postmaster for a fast shutdown and waits until it is gone. */
async function stopPostmaster(pid: number, child?: LaunchedProcess): Promise<void> {
  const gone = () => {
    try {
      process.kill(pid, 0);
      return false;
    } catch (error) {
      return (error as NodeJS.ErrnoException).code === "ESRCH";
    }
  };
  const exited = child
    ? new Promise<void>((resolve) => {
        if (child.exitCode !== null || child.signalCode !== null) resolve();
        else child.once("exit", () => resolve());
      })
    : undefined;
  try {
    process.kill(pid, "SIGINT");
  } catch {
    return;
  }
  const deadline = Date.now() + 30_000;
  let escalated = false;
  for (;;) {
    if (exited ? await Promise.race([exited.then(() => true), delay(50).then(() => false)]) : gone()) return;
    if (!exited) await delay(50);
    if (!escalated && Date.now() > deadline) {
      // Fast shutdown stuck (a backend that will not end): immediate shutdown, recovered on next start.
      escalated = true;
      try {
        process.kill(pid, "SIGQUIT");
      } catch {
        return;
      }
    }
  }
}

const delay = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts (initialising on first use) a PostgreSQL cluster whose files live in `dataDir`, and
 * makes sure `database` exists, owned by the app role. Data is kept between starts.
 *
 * Secrets: the superuser and app passwords are random per data folder (`<dataDir>/pg-secret`,
 * 0600). With `access: "socket"` (the default) the server listens on no TCP port at all, only on
 * a Unix socket inside its data directory; `"tcp"` (tests: their fault injection needs a proxy)
 * listens on loopback with SCRAM authentication.
 *
 * PostgreSQL runs in a session of its own: a Ctrl-C in the terminal reaches Stepwise only, which
 * stops the database after its workers and server have let go (`stop`).
 */
export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  database?: string;
  /** PostgreSQL's max_connections (tests of the connection budget start a smaller server). */
  maxConnections?: number;
  access?: "socket" | "tcp";
  /** More server settings (`name=value`), after Stepwise's own. */
  settings?: string[];
  log?: (line: string) => void;
  /**
   * The server stopped by itself, or was stopped from outside, after it was ready (`how`: its
   * exit code or signal); not called when `stop` stopped it.
   */
  onLost?: (how: string) => void;
}): Promise<EmbeddedDatabase> {
  await hydrateNativeSymlinks();
  const access = options.access ?? "socket";
  const port = options.port ?? (await findFreePort());
  const dataDir = path.resolve(options.dataDir);
  const databaseDir = path.join(dataDir, "pg");
  const database = options.database ?? "stepwise";
  const initialised = await fs
    .access(path.join(databaseDir, "PG_VERSION"))
    .then(() => true)
    .catch(() => false);
  await fs.mkdir(dataDir, { recursive: true });
  const { secret, created } = await readOrCreateSecret(dataDir);
  if (process.getuid?.() === 0) {
    const binaries = nativePackageDir();
    await letPostgresUserReach([dataDir, ...(binaries ? [path.join(binaries, "native")] : [])], options.log);
  }
  if (!initialised) await initialiseCluster(databaseDir, secret.superuser, options.log);
  await fs.writeFile(path.join(databaseDir, "pg_hba.conf"), hbaConfig(access));
  const owner = postgresUser();
  const socketDir = access === "socket" ? await socketDirectory(databaseDir, port, owner) : "";
  const postmaster = await spawnPostmaster({
    databaseDir,
    dataDir,
    port,
    access,
    socketDir,
    owner,
    maxConnections: options.maxConnections ?? EMBEDDED_MAX_CONNECTIONS,
    settings: options.settings ?? [],
    ...(options.onLost && { onLost: options.onLost }),
  });

  const serverUrlWith = (password: string) =>
    access === "socket"
      ? socketUrl(SUPERUSER, password, socketDir, port, "postgres")
      : tcpUrl(SUPERUSER, password, port, "postgres");
  try {
    await connectAsSuperuser(serverUrlWith(secret.superuser), async (client) => {
      await ensureAppRole(client, secret.app);
      if (database !== "postgres") await ensureAppDatabase(client, database, serverUrlWith(secret.superuser));
    }).catch(async (error: unknown) => {
      // A data folder from before generated passwords: its superuser still has the shared one.
      if ((error as { code?: string }).code !== "28P01" || !initialised) throw error;
      await connectAsSuperuser(serverUrlWith(LEGACY_PASSWORD), async (client) => {
        await client.query(`alter role ${SUPERUSER} with password '${secret.superuser}'`);
      }).catch((legacyError: unknown) => {
        throw new Error(
          `The embedded database in ${databaseDir} does not accept the password in ${path.join(dataDir, SECRET_FILE)}` +
            `${created ? " (just created: the original is lost)" : ""}. Restore that file, or move ${databaseDir} away to start with an empty database.`,
          { cause: legacyError },
        );
      });
      options.log?.("Replaced the embedded database's shared default password with a generated one");
      await connectAsSuperuser(serverUrlWith(secret.superuser), async (client) => {
        await ensureAppRole(client, secret.app);
        if (database !== "postgres") await ensureAppDatabase(client, database, serverUrlWith(secret.superuser));
      });
    });
  } catch (error) {
    await postmaster.stop();
    throw error;
  }
  const appUrl =
    access === "socket"
      ? socketUrl(APP_ROLE, secret.app, socketDir, port, database)
      : tcpUrl(APP_ROLE, secret.app, port, database);
  return {
    serverUrl: serverUrlWith(secret.superuser),
    // The `postgres` database is the test harness's: it administers, so it keeps the superuser.
    databaseUrl: database === "postgres" ? serverUrlWith(secret.superuser) : appUrl,
    pid: postmaster.pid,
    async stop() {
      await postmaster.stop();
      // A socket directory made under the temporary folder (a data path too long for a socket).
      if (socketDir && socketDir !== databaseDir) await fs.rm(socketDir, { recursive: true, force: true });
    },
  };
}

/**
 * Runs the PostgreSQL server as a child in a session of its own (setsid), its output in
 * `<dataDir>/pg.log`, and waits until it accepts connections. If this process exits without
 * stopping it (an uncaught error, a second Ctrl-C), the exit hook asks it to shut down.
 */
async function spawnPostmaster(options: {
  databaseDir: string;
  dataDir: string;
  port: number;
  access: "socket" | "tcp";
  socketDir: string;
  owner: { uid?: number; gid?: number };
  maxConnections: number;
  settings: string[];
  onLost?: (how: string) => void;
}): Promise<{ pid: number; stop(): Promise<void> }> {
  const binaries = nativePackageDir();
  if (!binaries) throw new Error(`No embedded PostgreSQL for ${process.platform}-${process.arch}`);
  const logPath = path.join(options.dataDir, LOG_FILE);
  const logFd = fsSync.openSync(logPath, "w", 0o600);
  const settings = [
    `max_connections=${options.maxConnections}`,
    `listen_addresses=${options.access === "tcp" ? "127.0.0.1" : ""}`,
    `unix_socket_directories=${options.socketDir}`,
    "unix_socket_permissions=0700",
    "password_encryption=scram-sha-256",
    ...options.settings,
  ];
  let child: LaunchedProcess;
  try {
    child = launch(
      {
        kind: "own",
        argv: [
          path.join(binaries, "native", "bin", "postgres"),
          ...["-D", options.databaseDir, "-p", String(options.port)],
          ...settings.flatMap((setting) => ["-c", setting]),
        ],
        why: "the embedded PostgreSQL",
      },
      {
        owner: options.owner,
        // Each Stepwise process opens up to ~50 connections at the default worker concurrency
        // (queue, engine and Prisma pools); PostgreSQL's default of 100 leaves room for only two,
        // and `stepwise worker` beside `stepwise serve` is exactly two. Slots cost little memory.
        detached: true,
        stdio: ["ignore", logFd, logFd],
        env: { ...(process.env as Record<string, string>), LC_MESSAGES: "C" },
      },
    );
  } finally {
    fsSync.closeSync(logFd);
  }
  const pid = child.pid;
  let exited = false;
  child.once("exit", () => (exited = true));
  const failure = async (reason: string) => {
    const log = await fs.readFile(logPath, "utf8").catch(() => "");
    const lastError = log
      .split("\n")
      .filter((line) => /FATAL|ERROR|PANIC/.test(line))
      .at(-1);
    return new Error(
      `Could not start the embedded PostgreSQL on port ${options.port} with data in ${options.databaseDir} (${lastError?.trim() ?? reason})`,
    );
  };
  if (pid === undefined) throw await failure("it could not be started");
  const onExit = () => {
    if (!exited) {
      try {
        process.kill(pid, "SIGINT");
      } catch {
        // Already gone.
      }
    }
  };
  process.on("exit", onExit);
  let stopping: Promise<void> | undefined;
  const stop = () => {
    stopping ??= stopPostmaster(pid, child).then(() => {
      process.off("exit", onExit);
    });
    return stopping;
  };
  const deadline = Date.now() + 120_000;
  for (;;) {
    if (exited) {
      process.off("exit", onExit);
      const running = await runningPostmaster(options.databaseDir);
      if (running) throw await anotherStepwiseError(running, options.dataDir);
      throw await failure("PostgreSQL exited");
    }
    const running = await runningPostmaster(options.databaseDir);
    if (running?.pid === pid && running.status === "ready") break;
    if (Date.now() > deadline) {
      await stop();
      throw await failure("not ready after 2 minutes");
    }
    await delay(50);
  }
  // Gone without being asked to (killed from outside, crashed): whoever started it is told.
  child.once("exit", (code, signal) => {
    if (!stopping) options.onLost?.(signal ? `signal ${signal}` : `exit code ${code}`);
  });
  // The server must not keep this process alive by itself; `stop` or the exit hook ends it.
  child.unref();
  return { pid, stop };
}
