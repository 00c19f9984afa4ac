import fs from "node:fs/promises";
import path from "node:path";

/**
 * `<data dir>/server.json`: how a local `stepwise` CLI finds the running server — its address and
 * the agent token of this server process. Readable by its owner only (0600), written when the
 * server is listening and removed when it stops. It holds no database credentials: a local worker
 * joins the embedded database through `<data dir>/pg-secret` and the socket PostgreSQL announces.
 */
export interface ConnectionFile {
  url: string;
  token: string;
  pid: number;
  startedAt: string;
}

export const CONNECTION_FILE = "server.json";

export async function writeConnectionFile(
  dataDir: string,
  connection: Omit<ConnectionFile, "startedAt">,
): Promise<string> {
  await fs.mkdir(dataDir, { recursive: true });
  const file = path.join(dataDir, CONNECTION_FILE);
  const temporary = `${file}.${process.pid}.tmp`;
  const body = JSON.stringify({ ...connection, startedAt: new Date().toISOString() }, null, 2);
  // Created 0600 from the start, then renamed into place: never readable by others, never half-written.
  await fs.rm(temporary, { force: true });
  await fs.writeFile(temporary, `${body}\n`, { mode: 0o600, flag: "wx" });
  await fs.rename(temporary, file);
  return file;
}

/** Removes the file if it is still this process's (a newer server may have replaced it). */
export async function removeConnectionFile(dataDir: string, pid = process.pid): Promise<void> {
  const file = path.join(dataDir, CONNECTION_FILE);
  const current = await readConnectionFile(dataDir);
  if (current?.pid === pid) await fs.rm(file, { force: true });
}

export async function readConnectionFile(dataDir: string): Promise<ConnectionFile | undefined> {
  try {
    const parsed = JSON.parse(
      await fs.readFile(path.join(dataDir, CONNECTION_FILE), "utf8"),
    ) as Partial<ConnectionFile>;
    if (typeof parsed.url !== "string" || typeof parsed.token !== "string" || typeof parsed.pid !== "number") {
      return undefined;
    }
    return parsed as ConnectionFile;
  } catch {
    return undefined;
  }
}

/** Whether a process with this pid exists (signal 0 checks without sending anything). */
export function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: it exists but belongs to another user.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}
