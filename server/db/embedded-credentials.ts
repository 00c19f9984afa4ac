import { randomBytes } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { runningPostmaster } from "./embedded-postmaster";

/*
 * Who connects to the embedded PostgreSQL and with what: the roles, the data folder's generated
 * passwords, and the connection URLs built from them.
 */

/** The bootstrap superuser, used only to create the app role and database. */
export const SUPERUSER = "postgres";
/**
 * The role the app connects as: it owns the app database (so migrations and the job queue's own
 * schema work) and nothing else — no superuser, so no `COPY … TO PROGRAM`, no reading server files.
 */
export const APP_ROLE = "stepwise";
/** The password every data folder had before passwords were generated; replaced on start. */
export const LEGACY_PASSWORD = "stepwise";
/** `<data dir>/pg-secret`: the generated passwords, readable by the owner of the data folder only. */
export const SECRET_FILE = "pg-secret";

interface DatabaseSecret {
  superuser: string;
  app: string;
}

/**
 * The data folder's database passwords, generated on first use and kept in a file only the
 * folder's owner can read. `created` says they are new (an existing cluster may still have the
 * old shared password, which is then replaced).
 */
export async function readOrCreateSecret(dataDir: string): Promise<{ secret: DatabaseSecret; created: boolean }> {
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

export function socketUrl(user: string, password: string, socketDir: string, port: number, database: string): string {
  // pg reads a `host` query parameter that starts with "/" as the socket directory; the port names
  // the socket file in it (.s.PGSQL.<port>).
  return `postgresql://${user}:${encodeURIComponent(password)}@localhost:${port}/${encodeURIComponent(database)}?host=${encodeURIComponent(socketDir)}`;
}

export function tcpUrl(user: string, password: string, port: number, database: string): string {
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
