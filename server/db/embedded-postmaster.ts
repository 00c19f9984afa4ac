import fsSync from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";

/*
 * The PostgreSQL already serving a data folder, as its postmaster.pid and /proc tell it: whether
 * it is ready, which process owns it, and whether that owner is gone.
 */

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
export function isOrphan(running: RunningPostmaster): boolean {
  if (running.parentPid === undefined) return false;
  return running.parentPid === 1 || !/^(node|tsx|MainThread)/.test(commandName(running.parentPid));
}

export async function anotherStepwiseError(
  running: RunningPostmaster,
  dataDir: string,
  cause?: unknown,
): Promise<Error> {
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
