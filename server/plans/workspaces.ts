import fs from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { AppError } from "../errors";

/** The system's own directories; project folders such as /usr/src/app or /var/lib/jenkins stay allowed. */
const SYSTEM_DIRECTORIES = [
  "/",
  "/bin",
  "/boot",
  "/dev",
  "/etc",
  "/lib",
  "/lib64",
  "/proc",
  "/run",
  "/sbin",
  "/sys",
  "/usr/bin",
  "/usr/include",
  "/usr/lib",
  "/usr/lib64",
  "/usr/sbin",
  "/usr/share",
];

/**
 * A directory plans work in, registered once by its real path. Callers name it (an agent's
 * `--workspace`, the HTTP API's `workspace`); it must be an existing directory given absolutely.
 * Registration is one statement, so concurrent requests naming the same new directory agree.
 */
export async function registerWorkspace(
  pool: Pick<pg.Pool, "query">,
  candidate: string,
): Promise<{ id: string; path: string }> {
  if (!path.isAbsolute(candidate))
    throw new AppError("invalid_input", `The workspace must be an absolute path: ${candidate}`);
  let real: string;
  try {
    real = await fs.realpath(candidate);
  } catch {
    throw new AppError("invalid_input", `The workspace ${candidate} does not exist`);
  }
  if (!(await fs.stat(real)).isDirectory())
    throw new AppError("invalid_input", `The workspace ${candidate} is not a directory`);
  // Tools act in a workspace and artifacts are written there: never the system's own directories.
  if (SYSTEM_DIRECTORIES.some((dir) => real === dir || (dir !== "/" && real.startsWith(`${dir}/`)))) {
    throw new AppError("forbidden", `${real} is a system directory, not a workspace`);
  }
  try {
    await fs.access(real, fs.constants.W_OK);
  } catch {
    throw new AppError("forbidden", `Stepwise cannot write to ${real}, so it cannot be a workspace`);
  }
  const row = await pool.query<{ id: string; path: string }>(
    `insert into workspaces (id, name, path) values (gen_random_uuid(), $1, $2)
     on conflict (path) do update set path = excluded.path returning id, path`,
    [path.basename(real) || real, real],
  );
  return row.rows[0]!;
}
