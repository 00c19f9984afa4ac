import type pg from "pg";
import { logger } from "../logger";
import type { Step, StepStatus } from "../plan-schema";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import {
  ensureTaskWorktree,
  removeMergedTaskWorktrees,
  removeRunWorktrees,
  removeTaskWorktree,
  removeUnusedTaskWorktree,
  taskWorktreeInPlace,
  workspaceRepository,
  type WorkspaceRepo,
} from "./worktrees";
import { taskBranchTip } from "./worktree-merges";

/**
 * Worktree work kept off an agent's call (issue 38, item 6): each sandboxed git costs tens of
 * milliseconds on an idle machine, far more on a busy one, and the agent needs none of these.
 *
 * - Ahead of a hand-out: the worktrees of the session's ready agent tasks (their dependencies
 *   DONE, so merged into the integration branch) are made after each call that can make tasks
 *   ready or take one, so the hand-out finds its task's worktree in place and starts no git.
 *   A task whose dependencies change before its hand-out gets a fresh one then (`claimTaskWorktree`).
 * - Before a DONE is recorded (task-reports.ts): the worktrees of the tasks it makes ready, made
 *   from the merged work, so no agent is handed one of them before its worktree is there.
 * - After a merge: the task's worktree and branch go, and a completed run's integration checkout.
 *
 * Work of one repository runs one piece at a time, in order; a failure is logged and leaves a
 * worktree for the next sweep (removeWorktreesOfFinishedRuns) or the next hand-out to make.
 * `worktreeWorkSettled` waits for all of it (closing the app, tests counting programs).
 */

const queues = new Map<string, Promise<void>>();

/**
 * Queues `work` behind the repository's earlier background work; resolves when it has run (a
 * failure is logged, not thrown).
 */
function inBackground(repositoryKey: string, what: string, work: () => Promise<void>): Promise<void> {
  const previous = queues.get(repositoryKey) ?? Promise.resolve();
  const next = previous
    .then(work)
    .catch((error: unknown) => logger.warn({ err: error, workspace: repositoryKey }, `could not ${what}`));
  queues.set(repositoryKey, next);
  void next.finally(() => {
    if (queues.get(repositoryKey) === next) queues.delete(repositoryKey);
  });
  return next;
}

/**
 * Resolves when the workspace's background worktree work queued so far has ended — removals
 * waiting for their moment are queued now: removing a run's worktrees waits for it, so a worktree
 * being made ahead is not left behind.
 */
export async function worktreeWorkDone(workspaceRoot: string): Promise<void> {
  removalsDue.get(workspaceRoot)?.();
  await queues.get(workspaceRoot);
}

/** Resolves when every piece of background worktree work queued so far (and after) has ended. */
export async function worktreeWorkSettled(): Promise<void> {
  while (queues.size > 0 || removalsDue.size > 0) {
    for (const queueNow of [...removalsDue.values()]) queueNow();
    await Promise.all([...queues.values()]);
  }
}

/** The agent tasks waiting only for `stepId`: the DONE being recorded makes them ready. */
export function tasksReadyAfter(steps: Step[], statuses: Map<string, StepStatus>, stepId: string): Step[] {
  const done = (id: string) => id === stepId || ["completed", "skipped"].includes(statuses.get(id) ?? "");
  return steps.filter(
    (step) =>
      step.tool === AGENT_TASK_TOOL &&
      step.forEach === undefined &&
      step.dependsOn.includes(stepId) &&
      (statuses.get(step.id) ?? "pending") === "pending" &&
      step.dependsOn.every(done),
  );
}

/**
 * Worktrees made ahead and not yet handed out, by path: the dependencies their task had then (all
 * DONE, so merged into the branch they started from) and the commit they started on. Kept in
 * memory: after a restart a worktree found in place is taken as it is, as before.
 */
const madeAhead = new Map<string, { dependsOn: string[]; tip: string }>();

const aheadWaiting = new Set<string>();

/**
 * Makes the worktrees of the run's ready, unleased agent tasks (at most the session's agent
 * concurrency, in plan order) in the background, reading which they are there too: nothing of it
 * is on the caller's path.
 */
export function makeReadyWorktreesAhead(
  pool: pg.Pool,
  session: { id: string; run_id: string; workspace_root: string },
): void {
  // One waiting turn per session is enough: it reads the ready tasks when it runs.
  if (aheadWaiting.has(session.id)) return;
  aheadWaiting.add(session.id);
  void inBackground(session.workspace_root, "make a ready task's worktree ahead of its hand-out", async () => {
    aheadWaiting.delete(session.id);
    const repo = await workspaceRepository(session.workspace_root);
    if (!repo) return;
    const rows = await pool.query<{ step_id: string; cap: number; steps: Step[] }>(
      `select r.step_id, s.agent_concurrency as cap, v.steps
         from run_steps r
         join agent_sessions s on s.id = $2
         join runs u on u.id = r.run_id
         join plan_versions v on v.plan_id = u.plan_id and v.version = u.plan_version
        where r.run_id = $1 and r.status = 'awaiting_agent'
          and not exists (select 1 from agent_task_leases l where l.session_id = $2 and l.step_id = r.step_id)`,
      [session.run_id, session.id],
    );
    if (rows.rows.length === 0) return;
    const ready = new Set(rows.rows.map((row) => row.step_id));
    const chosen = rows.rows[0]!.steps.filter((step) => step.tool === AGENT_TASK_TOOL && ready.has(step.id)).slice(
      0,
      rows.rows[0]!.cap,
    );
    await makeAhead(repo, session.run_id, chosen);
  });
}

async function makeAhead(repo: WorkspaceRepo, runId: string, steps: Step[]): Promise<void> {
  for (const step of steps) {
    if (await taskWorktreeInPlace(repo, runId, step.id)) continue;
    const absolute = await ensureTaskWorktree(repo, runId, step.id);
    madeAhead.set(absolute, { dependsOn: step.dependsOn, tip: await taskBranchTip(repo, runId, step.id) });
  }
}

/**
 * The worktrees of the tasks a DONE is about to make ready (at most the session's agent
 * concurrency), made now — after its merge, before it is recorded (task-reports.ts) — in the
 * repository's turn, so no agent can be handed one of them before its worktree is there.
 */
export async function makeWorktreesOfTasksReadyAfter(
  session: { run_id: string; workspace_root: string; agent_concurrency: number },
  steps: Step[],
): Promise<void> {
  if (steps.length === 0) return;
  await inBackground(session.workspace_root, "make the worktrees of the tasks a DONE makes ready", async () => {
    const repo = await workspaceRepository(session.workspace_root);
    if (repo) await makeAhead(repo, session.run_id, steps.slice(0, session.agent_concurrency));
  });
}

/**
 * The task's worktree for its hand-out. One made ahead for dependencies the task no longer has
 * all of (a person added one since) is made again from the integration branch as it is now —
 * only while nobody used it: git refuses to remove a worktree with changes or new files, and
 * the branch is deleted only while it is still where it started. Otherwise it is taken as it is.
 */
export async function claimTaskWorktree(repo: WorkspaceRepo, runId: string, step: Step): Promise<string> {
  const absolute = await ensureTaskWorktree(repo, runId, step.id);
  const ahead = madeAhead.get(absolute);
  madeAhead.delete(absolute);
  if (!ahead || step.dependsOn.every((dependency) => ahead.dependsOn.includes(dependency))) return absolute;
  await removeUnusedTaskWorktree(repo, runId, step.id, ahead.tip);
  return ensureTaskWorktree(repo, runId, step.id);
}

/** A run's merged tasks whose worktrees wait for removal, by run id. */
type RunRemovals = Map<string, { pool: pg.Pool; merged: { stepId: string; tip: string | undefined }[] }>;

/** Removals waiting for their turn, by workspace. */
const pendingRemovals = new Map<string, RunRemovals>();

/**
 * After merges were recorded: the merged tasks' worktrees and branches go (a branch only while it
 * still points at the commit merged), and with them, when the run is complete, its integration
 * checkout (its branch, the run's result, stays). Merges recorded while a removal waits its turn
 * join it: one launch removes them all (worktrees.ts, `removeMergedTaskWorktrees`).
 */
export function removeMergedWorktreesLater(
  pool: pg.Pool,
  run: { id: string; workspace_root: string },
  merged: { stepId: string; tip: string | undefined }[],
): void {
  const waiting = pendingRemovals.get(run.workspace_root);
  const runs: RunRemovals = waiting ?? new Map();
  runs.set(run.id, { pool, merged: [...(runs.get(run.id)?.merged ?? []), ...merged] });
  if (waiting) return;
  pendingRemovals.set(run.workspace_root, runs);
  // Queued a moment later, not at once: right after a merge is when agents take their next tasks,
  // and a launch started then (forking this process) delays their hand-outs; merges recorded
  // meanwhile join the same launch.
  const queueNow = () => {
    clearTimeout(timer);
    if (removalsDue.get(run.workspace_root) === queueNow) removalsDue.delete(run.workspace_root);
    removeLater(run.workspace_root, runs);
  };
  const timer = setTimeout(queueNow, REMOVAL_DELAY_MS);
  timer.unref();
  removalsDue.set(run.workspace_root, queueNow);
}

/** How long merged worktrees wait before their removal is queued. */
const REMOVAL_DELAY_MS = 500;

/** Per workspace: queues its waiting removals now (the timer's, `worktreeWorkDone`'s, or closing's). */
const removalsDue = new Map<string, () => void>();

function removeLater(workspaceRoot: string, runs: RunRemovals): void {
  void inBackground(workspaceRoot, "remove a merged task's worktree", async () => {
    pendingRemovals.delete(workspaceRoot);
    const repo = await workspaceRepository(workspaceRoot);
    if (!repo) return;
    for (const [runId, { pool: runPool, merged: steps }] of runs) {
      const known = steps.flatMap(({ stepId, tip }) => (tip ? [{ stepId, tip }] : []));
      await removeMergedTaskWorktrees(repo, runId, known).catch((error: unknown) =>
        logger.warn({ err: error, runId }, "could not remove a merged task's worktree"),
      );
      for (const { stepId } of steps.filter((step) => !step.tip)) {
        await removeTaskWorktree(repo, runId, stepId).catch((error: unknown) =>
          logger.warn({ err: error, runId, stepId }, "could not remove a merged task's worktree"),
        );
      }
      const status = await runPool.query<{ status: string }>("select status from runs where id = $1", [runId]);
      if (status.rows[0]?.status === "completed") await removeRunWorktrees(repo, runId);
    }
  });
}
