import fs from "node:fs/promises";
import path from "node:path";
import type pg from "pg";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { FINISHED_PLANNING_STATUSES, FINISHED_RUN_STATUSES } from "../vocabulary";
import { WORKSPACES_CHANNEL } from "../queue/jobs";

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
  pool: Queryable,
  candidate: string,
  name?: string,
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
  // Registering a removed directory again brings it back under its old id (and name, unless given).
  // Workers serving workspaces by name or by folder look again (server/engine/served-workspaces.ts).
  const row = await pool.query<{ id: string; path: string }>(
    `with registered as (
       insert into workspaces (id, name, path) values (gen_random_uuid(), coalesce($3, $1), $2)
       on conflict (path) do update set removed_at = null, name = coalesce($3, workspaces.name)
       returning id, path)
     -- As text: pg_notify returns void, which Prisma's raw queries (a plan edit's transaction
     -- registers the default workspace through them) cannot carry.
     select id, path, pg_notify($4, '')::text as notified from registered`,
    [path.basename(real) || real, real, name ?? null, WORKSPACES_CHANNEL],
  );
  return { id: row.rows[0]!.id, path: row.rows[0]!.path };
}

type Queryable = Pick<pg.Pool, "query">;

export interface WorkspaceView {
  id: string;
  name: string;
  path: string;
  /** The directory Stepwise was started with (STEPWISE_WORKSPACE, or the data folder's workspace). */
  isDefault: boolean;
  createdAt: string;
  /** Unfinished runs and open planning sessions acting in it: while any exist it cannot be removed. */
  openRuns: number;
  openSessions: number;
}

/** How many runs and planning sessions still act in the workspace: not in a finished state ($2, $3). */
const USES = `
  (select count(*)::int from runs r
    where (r.workspace_id = w.id or r.workspace_root = w.path) and r.status <> all($2::text[])) as open_runs,
  (select count(*)::int from planning_sessions s
    where (s.workspace_id = w.id or s.workspace_root = w.path) and s.status <> all($3::text[])) as open_sessions`;

interface WorkspaceRow {
  id: string;
  name: string;
  path: string;
  created_at: Date;
  open_runs: number;
  open_sessions: number;
}

/**
 * The default workspace, registered on first use: the directory the server was started with.
 * Everything without a workspace of its own (older tasks, callers that name none) acts in it.
 */
export function defaultWorkspace(pool: Queryable, defaultRoot: string): Promise<{ id: string; path: string }> {
  return registerWorkspace(pool, defaultRoot);
}

/** Registered workspaces that were not removed, the default first, then by name. */
export async function listWorkspaces(pool: Queryable, defaultRoot: string): Promise<WorkspaceView[]> {
  const fallback = await defaultWorkspace(pool, defaultRoot);
  const rows = await pool.query<WorkspaceRow>(
    `select w.id, w.name, w.path, w.created_at, ${USES}
     from workspaces w where w.removed_at is null
     order by w.id = $1 desc, lower(w.name), w.path`,
    [fallback.id, FINISHED_RUN_STATUSES, FINISHED_PLANNING_STATUSES],
  );
  return rows.rows.map((row) => toView(row, fallback.id));
}

function toView(row: WorkspaceRow, defaultId: string): WorkspaceView {
  return {
    id: row.id,
    name: row.name,
    path: row.path,
    isDefault: row.id === defaultId,
    createdAt: row.created_at.toISOString(),
    openRuns: row.open_runs,
    openSessions: row.open_sessions,
  };
}

/** A workspace new work may name: registered and not removed. */
export async function requireWorkspace(pool: Queryable, id: string): Promise<{ id: string; path: string }> {
  const row = await pool.query<{ id: string; path: string }>(
    "select id, path from workspaces where id = $1 and removed_at is null",
    [id],
  );
  if (!row.rows[0]) throw new AppError("not_found", `No workspace ${id}; register the directory first`);
  return row.rows[0];
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * A workspace named by id or by path that a person already registered (and did not remove), or
 * undefined. Never registers: this is how work an agent starts finds its directory.
 */
export async function findRegisteredWorkspace(
  pool: Queryable,
  idOrPath: string,
): Promise<{ id: string; path: string } | undefined> {
  const byId = UUID.test(idOrPath);
  let real = idOrPath;
  if (!byId) {
    if (!path.isAbsolute(idOrPath)) return undefined;
    real = await fs.realpath(idOrPath).catch(() => idOrPath);
  }
  const row = await pool.query<{ id: string; path: string }>(
    `select id, path from workspaces where ${byId ? "id = $1::uuid" : "path = $1"} and removed_at is null`,
    [real],
  );
  return row.rows[0];
}

/**
 * The workspace new work acts in: the server's default when none is named; a named one must be
 * registered already unless the caller may register directories (a person). An agent naming an
 * unregistered directory is refused, and nothing is registered.
 */
export async function workspaceForNewWork(
  pool: Queryable,
  input: { named?: string; defaultRoot: string; mayRegister: boolean },
): Promise<{ id: string; path: string }> {
  if (input.named === undefined) return defaultWorkspace(pool, input.defaultRoot);
  // The default workspace by its path is the default, registered or not yet.
  const [named, fallback] = await Promise.all(
    [input.named, input.defaultRoot].map((candidate) => fs.realpath(candidate).catch(() => candidate)),
  );
  if (named === fallback) return defaultWorkspace(pool, input.defaultRoot);
  const registered = await findRegisteredWorkspace(pool, input.named);
  if (registered) return registered;
  // A name that cannot be a directory at all is bad input, whoever sent it.
  if (!UUID.test(input.named)) {
    if (!path.isAbsolute(input.named))
      throw new AppError("invalid_input", `The workspace must be an absolute path: ${input.named}`);
    if (!(await fs.stat(input.named).catch(() => undefined))?.isDirectory())
      throw new AppError("invalid_input", `The workspace ${input.named} does not exist or is not a directory`);
  }
  if (!input.mayRegister) {
    throw new AppError(
      "forbidden",
      `${input.named} is not a registered workspace; only a person registers workspaces (ask them to add it on the Workspaces page; workspace.list shows the registered ones)`,
    );
  }
  return registerWorkspace(pool, input.named);
}

/** Renaming changes only what people see; the path, and everything acting in it, stays. */
export async function renameWorkspace(pool: Queryable, id: string, name: string): Promise<void> {
  const updated = await pool.query("update workspaces set name = $2 where id = $1 and removed_at is null", [id, name]);
  // Workers named to serve it by its new name look again (served-workspaces.ts).
  if ((updated.rowCount ?? 0) > 0) await pool.query("select pg_notify($1, '')", [WORKSPACES_CHANNEL]);
  if (updated.rowCount === 0) throw new AppError("not_found", `No workspace ${id}`);
}

/**
 * Takes a workspace off the list. Tasks, sessions and runs keep its path (the row stays, marked
 * removed), so their history reads as before. Refused for the default workspace and while a run
 * or planning session still acts in it. The row lock orders this against `startRun`, which reads
 * the same row with `for share` before a run may act in it.
 */
export async function removeWorkspace(pool: pg.Pool, id: string, defaultRoot: string): Promise<void> {
  const fallback = await defaultWorkspace(pool, defaultRoot);
  await inTransaction(pool, async (client) => {
    const row = await client.query<WorkspaceRow>(
      `select w.id, w.name, w.path, w.created_at, ${USES}
       from workspaces w where w.id = $1 and w.removed_at is null for update`,
      [id, FINISHED_RUN_STATUSES, FINISHED_PLANNING_STATUSES],
    );
    const workspace = row.rows[0];
    if (!workspace) throw new AppError("not_found", `No workspace ${id}`);
    if (workspace.id === fallback.id) {
      throw new AppError("invalid_state", `${workspace.name} is the default workspace and cannot be removed`);
    }
    if (workspace.open_runs > 0 || workspace.open_sessions > 0) {
      const uses = [
        workspace.open_runs > 0 && `${workspace.open_runs} unfinished run${workspace.open_runs === 1 ? "" : "s"}`,
        workspace.open_sessions > 0 &&
          `${workspace.open_sessions} open planning session${workspace.open_sessions === 1 ? "" : "s"}`,
      ].filter(Boolean);
      throw new AppError(
        "invalid_state",
        `${workspace.name} is in use by ${uses.join(" and ")}; finish or cancel them before removing it`,
        { openRuns: workspace.open_runs, openSessions: workspace.open_sessions },
      );
    }
    await client.query("update workspaces set removed_at = now() where id = $1", [id]);
    // Sent at commit: workers serving it stop taking its steps (served-workspaces.ts).
    await client.query("select pg_notify($1, '')", [WORKSPACES_CHANNEL]);
  });
}

/** The workspace a plan acts in, for showing it: its task's, or the default one. */
export async function describePlanWorkspace(
  pool: Queryable,
  planId: string,
  defaultRoot: string,
): Promise<{ id: string; name: string; path: string; removed: boolean; isDefault: boolean }> {
  const fallback = await defaultWorkspace(pool, defaultRoot);
  const row = await pool.query<{ id: string; name: string; path: string; removed: boolean }>(
    `select w.id, w.name, w.path, w.removed_at is not null as removed
     from workspaces w
     where w.id = coalesce((select t.workspace_id from plans p join tasks t on t.id = p.task_id where p.id = $1), $2)`,
    [planId, fallback.id],
  );
  const workspace = row.rows[0]!;
  return { ...workspace, isDefault: workspace.id === fallback.id };
}

/**
 * Where a plan's run acts: its task's workspace, or the default one for tasks made without one.
 * A removed workspace is refused, so nothing starts acting in a directory taken off the list.
 */
export async function workspaceForPlan(
  pool: Queryable,
  planId: string,
  defaultRoot: string,
): Promise<{ id: string; path: string }> {
  const row = await pool.query<{ id: string | null; path: string | null; name: string | null; removed: boolean }>(
    `select w.id, w.path, w.name, w.removed_at is not null as removed
     from plans p join tasks t on t.id = p.task_id left join workspaces w on w.id = t.workspace_id
     where p.id = $1`,
    [planId],
  );
  const found = row.rows[0];
  if (!found) throw new AppError("not_found", `No plan ${planId}`);
  if (!found.id || !found.path) return defaultWorkspace(pool, defaultRoot);
  if (found.removed) {
    throw new AppError(
      "invalid_state",
      `The workspace ${found.name} (${found.path}) of this plan was removed; register it again to run the plan`,
    );
  }
  return { id: found.id, path: found.path };
}
