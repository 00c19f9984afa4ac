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
  if (config.databaseUrl) await checkDatabaseUrl(config.databaseUrl);
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

/**
 * DATABASE_URL well-formed and answering, so a typo does not turn into the driver's "Can't reach
 * database server at `base`". The value itself is never printed: it carries a password.
 */
export async function checkDatabaseUrl(databaseUrl: string): Promise<void> {
  const example = "postgresql://user:password@host:5432/database";
  let url: URL;
  try {
    url = new URL(databaseUrl);
  } catch {
    throw new SettingError(
      `DATABASE_URL is not a URL; set it to ${example}, or unset it to use the embedded database.`,
    );
  }
  if (url.protocol !== "postgresql:" && url.protocol !== "postgres:") {
    throw new SettingError(
      `DATABASE_URL must start with postgresql:// (it starts with ${url.protocol}//); set it to ${example}.`,
    );
  }
  if (!url.hostname && !url.searchParams.get("host")) {
    throw new SettingError(`DATABASE_URL names no host; set it to ${example}.`);
  }
  if (url.pathname.length <= 1) {
    throw new SettingError(`DATABASE_URL names no database; set it to ${example}.`);
  }
  const client = new pg.Client({ connectionString: databaseUrl, connectionTimeoutMillis: CHECK_TIME_LIMIT_MS });
  client.on("error", () => undefined);
  try {
    await withTimeLimit(
      client.connect(),
      `DATABASE_URL: the PostgreSQL server at ${describeDatabase(url)} did not answer within ${CHECK_TIME_LIMIT_MS / 1000} s; fix DATABASE_URL, or unset it to use the embedded database.`,
    );
  } catch (error) {
    const { code, message } = error as { code?: string; message: string };
    const where = describeDatabase(url);
    const because =
      code === "28P01"
        ? "refused the user name or password"
        : code === "3D000"
          ? `has no database ${JSON.stringify(decodeURIComponent(url.pathname.slice(1)))}`
          : code === "ENOTFOUND" || code === "EAI_AGAIN"
            ? "is a host name that does not resolve"
            : `did not answer (${code ?? message})`;
    throw new SettingError(
      `DATABASE_URL: the PostgreSQL server at ${where} ${because}; fix DATABASE_URL, or unset it to use the embedded database.`,
    );
  } finally {
    await client.end().catch(() => undefined);
  }
}
