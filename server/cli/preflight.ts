import fs from "node:fs/promises";
import { createServer } from "node:http";
import path from "node:path";
import pg from "pg";
import { assertNoOtherStepwise } from "../db/embedded";
import { readConfig } from "../env";

/**
 * The settings checks `serve`, `worker` and `migrate` make before they start anything — before
 * the app's modules are even loaded, so a bad setting is reported within seconds. Each problem
 * becomes one line that names the setting and what to do, and every check has a time limit: a
 * data folder on a hung network mount must not leave a person looking at nothing.
 */
export class SettingError extends Error {}

// eslint-disable-next-line no-console -- the deliberate human output of the CLI
const say = (line: string) => console.log(`[stepwise] ${line}`);

export async function preflight(command: "serve" | "worker" | "migrate"): Promise<void> {
  const config = readConfig();
  await checkFolders(config);
  if (config.databaseUrl) {
    // A server and its workers are started by supervisors, often before their database: they
    // wait for it. `migrate` is a one-off a person or a deployment step runs and reads at once.
    if (command === "migrate") await checkDatabaseUrl(config.databaseUrl);
    else await waitForDatabase(config.databaseUrl);
  }
  if (command !== "serve") return;
  // A worker without DATABASE_URL may join the running server's database, and migrate may run
  // beside it; only a second server is refused here.
  if (!config.databaseUrl) await assertNoOtherStepwise(config.dataDir, say);
  await assertPortFree(config.port, config.host);
}

export function portError(error: unknown, port: number): Error {
  if ((error as NodeJS.ErrnoException).code === "EADDRINUSE") {
    return new SettingError(`Port ${port} is in use; set PORT to another port (e.g. PORT=${port + 1} npm start).`);
  }
  if ((error as NodeJS.ErrnoException).code === "ERR_SOCKET_BAD_PORT") {
    return new SettingError(
      `PORT must be a port number from 1 to 65535, got ${port}; set PORT to one (e.g. PORT=3000).`,
    );
  }
  if ((error as NodeJS.ErrnoException).code === "EADDRNOTAVAIL") {
    return new SettingError(`HOST is not an address of this machine; set HOST to one (e.g. HOST=127.0.0.1).`);
  }
  return error instanceof Error ? error : new Error(String(error));
}

async function assertPortFree(port: number, host: string): Promise<void> {
  const probe = createServer();
  try {
    await new Promise<void>((resolve, reject) => {
      probe.once("error", reject);
      // An out-of-range port throws here rather than emitting "error".
      probe.listen(port, host, resolve);
    });
  } catch (error) {
    throw portError(error, port);
  } finally {
    if (probe.listening) await new Promise((resolve) => probe.close(resolve));
  }
}

/** How long one check may take before it counts as failed. */
export const CHECK_TIME_LIMIT_MS = 5_000;

/**
 * Filesystems that only look like folders: the kernel's views of processes and devices. A data
 * folder there can never work (and a recursive mkdir under /proc used to loop for ever).
 */
const PSEUDO_FILESYSTEMS = new Map<number, string>([
  [0x9fa0, "procfs"],
  [0x62656572, "sysfs"],
  [0x27e0eb, "cgroup"],
  [0x63677270, "cgroup2"],
  [0x64626720, "debugfs"],
  [0x74726163, "tracefs"],
  [0x1cd1, "devpts"],
  [0x73636673, "securityfs"],
  [0x6e736673, "nsfs"],
  [0xcafe4a11, "bpf"],
]);

function withTimeLimit<T>(work: Promise<T>, whenTooSlow: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const limit = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new SettingError(whenTooSlow)), CHECK_TIME_LIMIT_MS);
    timer.unref();
  });
  return Promise.race([work, limit]).finally(() => clearTimeout(timer));
}

const reasons: Record<string, string> = {
  EROFS: "is on a read-only filesystem",
  EACCES: "is not writable by this user",
  EPERM: "is not writable by this user",
  ENOTDIR: "is not a folder (a file is in the way)",
  EEXIST: "is not a folder (a file is in the way)",
  ENOSPC: "is on a full disk",
  EDQUOT: "is over its disk quota",
  ENAMETOOLONG: "is too long a path",
  ELOOP: "goes through a loop of symbolic links",
};

/**
 * Creates `dir` (and missing parents) one level at a time, from the nearest existing ancestor —
 * never Node's recursive mkdir, which spins on some pseudo filesystems — and refuses pseudo
 * filesystems before writing anything. With `writable`, proves a file can be created and removed.
 */
async function checkFolder(variable: string, dir: string, writable: boolean): Promise<void> {
  const fail = (reason: string, action = `set ${variable} to a writable folder`) =>
    new SettingError(`${variable} (${dir}) ${reason}; ${action}.`);
  const missing: string[] = [];
  let existing = dir;
  for (;;) {
    const stat = await fs.stat(existing).catch((error: NodeJS.ErrnoException) => error);
    if (!(stat instanceof Error)) {
      if (!stat.isDirectory()) throw fail(reasons.ENOTDIR!);
      break;
    }
    if (stat.code !== "ENOENT") throw fail(reasons[stat.code ?? ""] ?? `cannot be used (${stat.code})`);
    const parent = path.dirname(existing);
    if (parent === existing) break;
    missing.unshift(existing);
    existing = parent;
  }
  const real = await fs.realpath(existing).catch(() => existing);
  const type = (await fs.statfs(real).catch(() => undefined))?.type;
  const pseudo = type === undefined ? undefined : PSEUDO_FILESYSTEMS.get(type);
  if (pseudo || /^\/(proc|sys)(\/|$)/.test(real)) {
    throw fail(`is inside ${pseudo ?? real.split("/")[1]}, the kernel's view of the system, not a place for files`);
  }
  for (const level of missing) {
    await fs.mkdir(level).catch((error: NodeJS.ErrnoException) => {
      if (error.code !== "EEXIST") throw fail(reasons[error.code ?? ""] ?? `cannot be created (${error.code})`);
    });
  }
  if (!writable) return;
  const probe = path.join(dir, `.stepwise-write-check-${process.pid}`);
  try {
    await fs.writeFile(probe, "", { flag: "wx" });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? "";
    if (code !== "EEXIST") throw fail(reasons[code] ?? `cannot be written (${code})`);
  }
  await fs.rm(probe, { force: true });
}

/** STEPWISE_DATA_DIR (and STEPWISE_WORKSPACE) usable: created if missing, not a pseudo filesystem. */
export async function checkFolders(config: { dataDir: string; workspaceDir: string }): Promise<void> {
  const slow = (variable: string, dir: string) =>
    `${variable} (${dir}) did not answer within ${CHECK_TIME_LIMIT_MS / 1000} s (a hung network filesystem?); set ${variable} to a local folder.`;
  await withTimeLimit(
    checkFolder("STEPWISE_DATA_DIR", config.dataDir, true),
    slow("STEPWISE_DATA_DIR", config.dataDir),
  );
  await withTimeLimit(
    checkFolder("STEPWISE_WORKSPACE", config.workspaceDir, false),
    slow("STEPWISE_WORKSPACE", config.workspaceDir),
  );
}

/** A PostgreSQL URL's parts a person can be shown: never the password. */
function describeDatabase(url: URL): string {
  const socket = url.searchParams.get("host");
  return socket ? `${socket} (socket)` : `${url.hostname}:${url.port || "5432"}`;
}

const EXAMPLE_URL = "postgresql://user:password@host:5432/database";

/** DATABASE_URL's shape: a PostgreSQL URL naming a host and a database. The value is never printed. */
function parseDatabaseUrl(databaseUrl: string): URL {
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new SettingError(
      `DATABASE_URL is not a URL; set it to ${EXAMPLE_URL}, or unset it to use the embedded database.`,
    );
  }
  if (url.protocol !== "postgresql:" && url.protocol !== "postgres:") {
    throw new SettingError(
      `DATABASE_URL must start with postgresql:// (it starts with ${url.protocol}//); set it to ${EXAMPLE_URL}.`,
    );
  }
  if (!url.hostname && !url.searchParams.get("host")) {
    throw new SettingError(`DATABASE_URL names no host; set it to ${EXAMPLE_URL}.`);
  }
  if (url.pathname.length <= 1) {
    throw new SettingError(`DATABASE_URL names no database; set it to ${EXAMPLE_URL}.`);
  }
  return url;
}

/**
 * What one connection attempt found: the server answered (`ok`), refused what can never work
 * (`never`: the user name or password, a database that does not exist — waiting would not change
 * them), or is not there yet (`notYet`: nothing listens, the host name does not resolve yet, the
 * server is starting or full, no answer in time) — a supervisor may start Stepwise first.
 */
type ConnectResult =
  | { ok: true }
  | { ok: false; never: string }
  /** `reason` for a person; `because` completes "the PostgreSQL server at host:port …". */
  | { ok: false; never?: undefined; reason: string; because: string };

async function tryConnect(databaseUrl: string, url: URL): Promise<ConnectResult> {
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: CHECK_TIME_LIMIT_MS });
  client.on("error", () => undefined);
  const slow = `did not answer within ${CHECK_TIME_LIMIT_MS / 1000} s`;
  try {
    await withTimeLimit(client.connect(), slow);
    return { ok: true };
  } catch (error) {
    if (error instanceof SettingError) return { ok: false, reason: "no answer", because: slow };
    const { code, message } = error as { code?: string; message: string };
    if (code === "28P01") return { ok: false, never: "refused the user name or password" };
    if (code === "28000") return { ok: false, never: `refused the connection (${message})` };
    if (code === "3D000") {
      return { ok: false, never: `has no database ${JSON.stringify(decodeURIComponent(url.pathname.slice(1)))}` };
    }
    if (code === "ENOTFOUND" || code === "EAI_AGAIN") {
      return { ok: false, reason: "host name does not resolve", because: "is a host name that does not resolve" };
    }
    const reasons: Record<string, string> = {
      ECONNREFUSED: "connection refused",
      "53300": "too many connections",
      "57P03": "starting up",
    };
    return {
      ok: false,
      reason: reasons[code ?? ""] ?? code ?? message,
      because: `did not answer (${code ?? message})`,
    };
  } finally {
    await client.end().catch(() => undefined);
  }
}

const fixIt = "fix DATABASE_URL, or unset it to use the embedded database.";

/**
 * DATABASE_URL well-formed and answering, so a typo does not turn into the driver's "Can't reach
 * database server at `base`". The value itself is never printed: it carries a password.
 */
export async function checkDatabaseUrl(databaseUrl: string): Promise<void> {
  const url = parseDatabaseUrl(databaseUrl);
  const result = await tryConnect(databaseUrl, url);
  if (result.ok) return;
  throw new SettingError(
    `DATABASE_URL: the PostgreSQL server at ${describeDatabase(url)} ${result.never ?? result.because}; ${fixIt}`,
  );
}

/** How often a wait that is not shown in place (output to a file or a pipe) says it still waits. */
export const WAIT_REPORT_EVERY_MS = 10_000;
/** The pause between two connection attempts while waiting. */
const WAIT_RETRY_MS = 1_000;

/**
 * Waits until DATABASE_URL's server accepts a connection, however long that takes: a server or
 * worker started before its database (by a supervisor, by compose) waits for it instead of
 * exiting. Only what waiting cannot fix ends the process: a malformed URL, refused credentials, a
 * database that does not exist — one line naming DATABASE_URL. The wait shows one line: on a
 * terminal it is rewritten in place each second; otherwise a line is printed every ~10 s.
 */
export async function waitForDatabase(
  databaseUrl: string,
  output: { write(text: string): void; isTTY?: boolean } = process.stdout,
): Promise<void> {
  const url = parseDatabaseUrl(databaseUrl);
  const started = Date.now();
  let lastReport: number | undefined;
  for (;;) {
    const result = await tryConnect(databaseUrl, url);
    const seconds = Math.round((Date.now() - started) / 1000);
    if (result.ok) {
      if (lastReport !== undefined) {
        output.write(
          `${output.isTTY ? "\r\x1b[2K" : ""}[stepwise] PostgreSQL at ${describeDatabase(url)} answered after ${seconds} s\n`,
        );
      }
      return;
    }
    if (result.never !== undefined) {
      if (lastReport !== undefined && output.isTTY) output.write("\n");
      throw new SettingError(
        `DATABASE_URL: the PostgreSQL server at ${describeDatabase(url)} ${result.never}; ${fixIt}`,
      );
    }
    const line = `[stepwise] waiting for PostgreSQL at ${describeDatabase(url)} (${result.reason}) — ${seconds} s`;
    if (output.isTTY) {
      output.write(`\r\x1b[2K${line}`);
      lastReport = Date.now();
    } else if (lastReport === undefined || Date.now() - lastReport >= WAIT_REPORT_EVERY_MS) {
      output.write(`${line}\n`);
      lastReport = Date.now();
    }
    await new Promise((resolve) => setTimeout(resolve, WAIT_RETRY_MS));
  }
}
