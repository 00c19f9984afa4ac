import { stat } from "node:fs/promises";
import type pg from "pg";
import { isConnectionError } from "../database-faults";
import { logger } from "../logger";
import { RUN_STEP_TASK, workspaceTaskFor } from "../queue/jobs";

/*
 * Which workspaces a worker serves. A step acting in a workspace is queued under that workspace's
 * task (server/queue/jobs.ts, `stepTaskFor`), and so is a planning session's loop (it reads the
 * workspace's files); a worker's job runner lists the tasks of the workspaces it serves, so only
 * such a worker takes the job. The set is recorded on the worker's
 * row (`workers.workspaces`), which is how a step nobody can run is told apart from one waiting
 * its turn (`listUnservedSteps`, unserved.ts).
 */

const log = logger.child({ component: "worker" });

/**
 * What a worker was told to serve: the workspaces named (`stepwise worker --workspace NAME…`,
 * a registered name or path), or — without names — every registered workspace whose directory
 * exists on this machine, and the process's own default workspace when it exists.
 */
export interface WorkspaceChoice {
  names?: readonly string[];
  defaultWorkspace?: string;
}

/** Whether the choice names workspaces (otherwise it is "whatever exists here"). */
function named(choice: WorkspaceChoice): choice is WorkspaceChoice & { names: readonly string[] } {
  return choice.names !== undefined && choice.names.length > 0;
}

/**
 * The paths the choice serves now. A named workspace that is not registered (yet) is served once it
 * is: the worker looks again when a workspace is registered or changed (a NOTIFY from the
 * `workspaces` table's trigger) and on a slow timer. A name that is an absolute path is served as
 * that path even unregistered (runs of the default workspace need not be registered).
 */
export async function resolveServedWorkspaces(
  db: Pick<pg.Pool, "query">,
  choice: WorkspaceChoice,
): Promise<{ paths: string[]; unknown: string[] }> {
  const registered = await db.query<{ name: string; path: string }>(
    "select name, path from workspaces where removed_at is null order by path",
  );
  if (named(choice)) {
    const paths = new Set<string>();
    const unknown: string[] = [];
    for (const name of choice.names) {
      const matches = registered.rows.filter((w) => w.name === name || w.path === name);
      if (matches.length > 0) for (const w of matches) paths.add(w.path);
      else if (name.startsWith("/")) paths.add(name);
      else unknown.push(name);
    }
    return { paths: [...paths].sort(), unknown };
  }
  const candidates = new Set(registered.rows.map((w) => w.path));
  if (choice.defaultWorkspace) candidates.add(choice.defaultWorkspace);
  const present = await Promise.all([...candidates].map(async (path) => ((await isDirectory(path)) ? path : null)));
  return { paths: present.filter((path): path is string => path !== null).sort(), unknown: [] };
}

async function isDirectory(path: string): Promise<boolean> {
  try {
    return (await stat(path)).isDirectory();
  } catch {
    return false;
  }
}

/**
 * The served set of one worker, kept current: `refresh` resolves the choice again and, when the
 * set changed, records it on the worker's row and says so (the worker then restarts its job runner
 * with the new tasks).
 */
export class ServedWorkspaces {
  private paths = new Set<string>();
  private unknownWarned = "";

  constructor(
    private readonly db: Pick<pg.Pool, "query">,
    private readonly choice: WorkspaceChoice,
  ) {}

  has(workspace: string): boolean {
    return this.paths.has(workspace);
  }

  list(): string[] {
    return [...this.paths];
  }

  /** The queue tasks of step jobs this worker takes: workspace-free steps and those of its workspaces. */
  stepTasks(): string[] {
    return [RUN_STEP_TASK, ...this.tasksOf(RUN_STEP_TASK)];
  }

  /** `task` routed to each workspace this worker serves (`<task>@<key>`, see `workspaceTaskFor`). */
  tasksOf(task: string): string[] {
    return [...this.paths].map((path) => workspaceTaskFor(task, path));
  }

  /** Resolves the choice again; true when the served set changed. */
  async refresh(): Promise<boolean> {
    const { paths, unknown } = await resolveServedWorkspaces(this.db, this.choice);
    if (unknown.length > 0 && unknown.join("\n") !== this.unknownWarned) {
      log.warn({ workspaces: unknown }, "no registered workspace has these names; served once registered");
    }
    this.unknownWarned = unknown.join("\n");
    const changed = paths.length !== this.paths.size || paths.some((path) => !this.paths.has(path));
    this.paths = new Set(paths);
    return changed;
  }

  /** Records the served set on the worker's row (read by `listUnservedSteps`, unserved.ts). */
  async record(workerId: string): Promise<void> {
    await this.db.query("update workers set workspaces = $2 where id = $1", [workerId, this.list()]);
  }
}

/** How often a worker looks again for workspace directories appearing on its machine. */
const WORKSPACE_RECHECK_MS = Number(process.env.STEPWISE_WORKSPACE_RECHECK_MS ?? 30_000);

/**
 * Re-resolves the served workspaces when asked (`check`, on a NOTIFY) and on a slow timer; one
 * check at a time, and a check asked for during one runs again after it. `onChange` runs when the
 * set changed.
 */
export function watchServedWorkspaces(
  served: ServedWorkspaces,
  onChange: () => Promise<void>,
): { check(): void; clear(): void } {
  let running: Promise<void> | undefined;
  let again = false;
  let cleared = false;
  let unapplied = false;
  const check = () => {
    if (cleared) return;
    if (running) {
      again = true;
      return;
    }
    running = served
      .refresh()
      .then(async (changed) => {
        if (!changed && !unapplied) return;
        // Until onChange succeeds (a dropped connection while recording), later checks apply it.
        unapplied = true;
        await onChange();
        unapplied = false;
      })
      .catch((error: unknown) => {
        // After `clear` the pools may be closing under a check still under way: not worth a line.
        if (!cleared && !isConnectionError(error))
          log.error({ err: String(error) }, "could not re-check the served workspaces");
      })
      .finally(() => {
        running = undefined;
        if (again) {
          again = false;
          check();
        }
      });
  };
  const timer = setInterval(check, WORKSPACE_RECHECK_MS);
  timer.unref();
  return {
    check,
    clear: () => {
      cleared = true;
      clearInterval(timer);
    },
  };
}

/** SQL: worker row `w` is alive — not stopped, and it beat within `missedBeats` of its own intervals. */
export function liveWorkerSql(missedBeats: number): string {
  return `w.stopped_at is null and w.last_seen > now() - make_interval(secs => w.heartbeat_ms * ${missedBeats} / 1000.0)`;
}
