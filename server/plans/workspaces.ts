import fs from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { AppError } from "../errors";

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
  const row = await pool.query<{ id: string; path: string }>(
    `insert into workspaces (id, name, path) values (gen_random_uuid(), $1, $2)
     on conflict (path) do update set path = excluded.path returning id, path`,
    [path.basename(real) || real, real],
  );
  return row.rows[0]!;
}
