import type pg from "pg";
import type { AppContext } from "../services";
import { inTransaction } from "../db";
import { DatabaseListener } from "../db/listener";
import { AppError, type AppErrorCode } from "../errors";
import { logger } from "../logger";
import { MISSED_BEATS } from "../engine/queue-locks";
import { liveWorkerSql } from "../engine/served-workspaces";
import { enqueueAgentWorkspaceCall } from "../queue/jobs";

/*
 * Where agent workspace work runs (issue 41): a task's worktree, a DONE's commit, verifiers and
 * merge, and the worktrees made ahead all touch the workspace's folder, which is on the machine of
 * the workers serving it. The process answering the agent does that work itself when its own
 * worker serves the workspace (a lookup in memory, no query); otherwise it writes the call as a
 * row (`agent_workspace_calls`), queues a job on the workspace's own task (`agent_workspace@<hash>`,
 * routed like the workspace's steps) and waits for the row's result — woken by a NOTIFY, with a
 * poll as the fallback. What the worker does with a call is in workspace-work.ts.
 */

type App = Pick<AppContext, "db" | "engine">;
/** What deciding the place and sending a call need (a door's steer has the engine only). */
type SendApp = { db: { pool: pg.Pool }; engine: Pick<AppContext["engine"], "localWorker"> };

/** Here: this process's own worker serves the workspace. Worker: another process's does. */
export type WorkspacePlace = "here" | "worker";

/** NOTIFY channel: a call's row has its result (the payload is the call's id). */
export const AGENT_WORKSPACE_CHANNEL = "stepwise_agent_workspace";

/** How long a call may wait for a worker to take it before the agent is told none serves the workspace. */
const START_TIMEOUT_MS = Number(process.env.STEPWISE_AGENT_WORKSPACE_START_MS ?? 30_000);
/**
 * How long a taken call may run at all: the longest work is a DONE's verifiers (each up to
 * 10 minutes); past this the agent is told to try again, and the worker's outcome still lands on the row.
 */
const RUN_TIMEOUT_MS = Number(process.env.STEPWISE_AGENT_WORKSPACE_TIMEOUT_MS ?? 3_600_000);
/** The poll under the NOTIFY: a missed notification costs at most this. */
const POLL_MS = 1_000;

const log = logger.child({ component: "agent-workspace" });

export type CallKind =
  | "hand_out"
  | "working_directory"
  | "finish_report"
  | "after_updates"
  | "ahead"
  | "remove_run"
  | "paths_exist"
  | "todo_markers";

/** What a call names: the session (and so its run and workspace), a step, and plain input data. */
export interface CallRequest {
  kind: CallKind;
  session: { id: string; run_id: string; workspace_root: string };
  stepId?: string;
  input?: object;
}

/**
 * Where the workspace's agent work runs now. Here when this process's own worker serves it (no
 * query: the worker's served set is in memory); on a worker when a live one serves it (one
 * query); else the agent is answered that no worker serves the workspace, and nothing changed.
 */
export async function workspacePlace(app: SendApp, workspaceRoot: string): Promise<WorkspacePlace> {
  if (app.engine.localWorker?.servesWorkspace?.(workspaceRoot)) return "here";
  const live = await app.db.pool.query(
    `select 1 from workers w where ${liveWorkerSql(MISSED_BEATS)} and $1 = any(w.workspaces) limit 1`,
    [workspaceRoot],
  );
  if ((live.rowCount ?? 0) > 0) return "worker";
  throw await unservedError(app.db.pool, workspaceRoot);
}

/** Like `workspacePlace`, but undefined instead of the error: for work nobody waits for. */
export async function workspacePlaceIfServed(app: SendApp, workspaceRoot: string): Promise<WorkspacePlace | undefined> {
  try {
    return await workspacePlace(app, workspaceRoot);
  } catch (error) {
    if (error instanceof AppError && error.code === "unavailable") return undefined;
    throw error;
  }
}

/** The agent's answer when no worker serves the workspace: it may try again once one does. */
async function unservedError(pool: pg.Pool, workspaceRoot: string, why?: string): Promise<AppError> {
  const named = await pool.query<{ name: string }>(
    "select name from workspaces where path = $1 and removed_at is null limit 1",
    [workspaceRoot],
  );
  const name = named.rows[0]?.name ?? null;
  return new AppError(
    "unavailable",
    `No worker serves workspace ${name ?? workspaceRoot}${why ? ` (${why})` : ""}: its agent work ` +
      "(worktrees, verifiers, merges) runs on a worker serving it. Try again once one runs " +
      "(`stepwise worker --workspace NAME` on the machine that has the folder).",
    { reason: "workspace_unserved", workspace: { path: workspaceRoot, name }, retry: true },
  );
}

/** Writes the call and queues its job, in one transaction; returns the call's id. */
async function queueCall(app: SendApp, request: CallRequest): Promise<string> {
  return inTransaction(app.db.pool, (client) => queueCallIn(client, request));
}

/**
 * Writes the call and queues its job in the caller's transaction, so they commit with what the
 * call is about (a reported DONE's row) or not at all.
 */
export async function queueCallIn(client: pg.PoolClient, request: CallRequest): Promise<string> {
  const inserted = await client.query<{ id: string }>(
    `insert into agent_workspace_calls (kind, workspace_root, session_id, run_id, step_id, input)
     values ($1, $2, $3, $4, $5, $6) returning id`,
    [
      request.kind,
      request.session.workspace_root,
      request.session.id,
      request.session.run_id,
      request.stepId ?? null,
      JSON.stringify(request.input ?? {}),
    ],
  );
  const id = inserted.rows[0]!.id;
  await enqueueAgentWorkspaceCall(client, { id, workspace: request.session.workspace_root });
  return id;
}

/** Queues work nobody waits for (worktrees made ahead, cleanup after a merge). */
export async function sendToWorker(app: SendApp, request: CallRequest): Promise<void> {
  await queueCall(app, request);
}

/**
 * Has a worker serving the workspace do the call and returns its result. Bounded: a call no
 * worker took within START_TIMEOUT_MS is withdrawn (so it never runs late) and answered as
 * unserved; a call whose worker stopped while doing it is answered as failed.
 */
export async function callOnWorker<T>(app: App, request: CallRequest): Promise<T> {
  const waiter = await listen(app.db.url);
  try {
    const id = await queueCall(app, request);
    waiter.watch(id);
    const since = Date.now();
    for (;;) {
      const row = await readCall(app.db.pool, id);
      if (row.finished) {
        if (row.error) throw errorOf(row.error);
        return row.result as T;
      }
      if (!row.started && Date.now() - since > START_TIMEOUT_MS) {
        const withdrawn = await app.db.pool.query(
          `update agent_workspace_calls set finished_at = clock_timestamp(), error = $2
            where id = $1 and started_at is null and finished_at is null`,
          [id, JSON.stringify({ message: "no worker took it in time" })],
        );
        if ((withdrawn.rowCount ?? 0) > 0) {
          throw await unservedError(app.db.pool, request.session.workspace_root, "none took the call in time");
        }
        continue;
      }
      if (Date.now() - since > RUN_TIMEOUT_MS) {
        throw new AppError(
          "unavailable",
          `The agent work in ${request.session.workspace_root} took longer than ${Math.round(RUN_TIMEOUT_MS / 60_000)} minutes; try again.`,
          { reason: "worker_timeout", retry: true },
        );
      }
      if (row.started && !row.workerAlive) {
        throw new AppError(
          "unavailable",
          `The worker doing this agent work in ${request.session.workspace_root} stopped; try again.`,
          { reason: "worker_stopped", retry: true },
        );
      }
      await waiter.next();
    }
  } finally {
    waiter.close();
  }
}

interface CallState {
  started: boolean;
  finished: boolean;
  result: unknown;
  error: { message: string; code?: AppErrorCode; details?: unknown } | null;
  workerAlive: boolean;
}

async function readCall(pool: pg.Pool, id: string): Promise<CallState> {
  const rows = await pool.query<CallState>(
    `select c.started_at is not null as started, c.finished_at is not null as finished, c.result, c.error,
            exists (select 1 from workers w where w.id = c.worker_id and ${liveWorkerSql(MISSED_BEATS)}) as "workerAlive"
       from agent_workspace_calls c where c.id = $1`,
    [id],
  );
  return rows.rows[0]!;
}

/** The worker's error as the agent gets it: a domain error keeps its code. */
function errorOf(error: NonNullable<CallState["error"]>): Error {
  return error.code ? new AppError(error.code, error.message, error.details) : new Error(error.message);
}

/**
 * One LISTEN connection per process and database while some call waits (closed with the last
 * waiter: a process that never asks a worker holds none). Each waiter is woken by its call's
 * notification, by a reconnection (a notification may have been missed), or by the poll.
 */
interface Waiter {
  /** From now on only this call's notification (or a reconnection) wakes it. */
  watch(callId: string): void;
  next(): Promise<void>;
  close(): void;
}

interface Listening {
  listener: DatabaseListener;
  started: Promise<void>;
  waiters: Set<{ callId?: string; wake(): void }>;
}

const listening = new Map<string, Listening>();

async function listen(databaseUrl: string): Promise<Waiter> {
  let shared = listening.get(databaseUrl);
  if (!shared) {
    const waiters = new Set<{ callId?: string; wake(): void }>();
    const wakeAll = (_channel?: string, callId?: string) => {
      for (const waiter of waiters)
        if (!callId || waiter.callId === undefined || waiter.callId === callId) waiter.wake();
    };
    const listener = new DatabaseListener({
      databaseUrl,
      channels: [AGENT_WORKSPACE_CHANNEL],
      onNotification: wakeAll,
      onConnected: () => wakeAll(),
    });
    // Without the connection the poll still finds the result; only slower.
    const started = listener.start().catch((error: unknown) => {
      log.warn({ err: String(error) }, "could not listen for agent workspace results; polling");
    });
    shared = { listener, started, waiters };
    listening.set(databaseUrl, shared);
  }
  const own = shared;
  let pending = false;
  let resolve: (() => void) | undefined;
  const entry: { callId?: string; wake(): void } = {
    wake() {
      pending = true;
      resolve?.();
    },
  };
  own.waiters.add(entry);
  await own.started;
  return {
    watch(callId) {
      entry.callId = callId;
    },
    next() {
      if (pending) {
        pending = false;
        return Promise.resolve();
      }
      return new Promise<void>((done) => {
        const timer = setTimeout(finish, POLL_MS);
        function finish() {
          clearTimeout(timer);
          resolve = undefined;
          pending = false;
          done();
        }
        resolve = finish;
      });
    },
    close() {
      own.waiters.delete(entry);
      if (own.waiters.size > 0 || listening.get(databaseUrl) !== own) return;
      listening.delete(databaseUrl);
      void own.listener.close().catch(() => undefined);
    },
  };
}
