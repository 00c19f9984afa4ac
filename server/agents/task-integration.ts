import path from "node:path";
import type pg from "pg";
import type { AgentTaskUpdate } from "../engine/engine";
import { appendEvents } from "../events/store";
import type { Step, StepStatus } from "../plan-schema";
import { inTransaction, withAdvisoryLock } from "../db";
import { AGENT_TASK_TOOL, verifierCommands } from "../tools/agent-task";
import { taskNumber } from "../engine/agent-signals";
import { findingsNote, runVerifiers, type VerifierResult } from "./verifiers";
import { stepApprovedUnderPolicy } from "../engine/approval-view";
import type { ToolRegistry } from "../tools/registry";
import { removeMergedWorktreesLater, worktreeWorkDone } from "./worktrees-ahead";
import { FINISHED_RUN_STATUSES } from "../vocabulary";
import {
  ensureTaskWorktree,
  integrationBranch,
  removeRunWorktrees,
  runsWithWorktrees,
  taskWorktreeExists,
  worktreeRelativePath,
  workspaceRepository,
  type WorkspaceRepo,
} from "./worktrees";
import { commitAndMergeTaskBranch, commitPendingWork, mergeTaskBranch, type MergeOutcome } from "./worktree-merges";

/**
 * What happens between an agent's DONE and the engine recording it (issue "Parallel agent work"):
 * the task's worktree is committed, its verifiers run there, and its branch is merged into the
 * run's integration branch. A failing verifier turns the DONE into a TODO with the findings; a
 * merge conflict holds the task (it stays IN_PROGRESS) behind a blocker signal naming the files.
 * Dependents are held either way, because the task is not DONE. A worker serving the workspace
 * runs it for a reported DONE (task-reports.ts), and `updateSession` for a DONE with nothing to
 * integrate; `updateAgentTasks` records what it decided, and `afterTaskUpdates` runs just after.
 */

interface RunInfo {
  id: string;
  plan_id: string;
  trace_id: string;
  plan_version: number;
  workspace_root: string;
}

export interface ConflictSignal {
  key: string;
  taskId: number | null;
  message: string;
}

export interface PreparedUpdates {
  /** The updates to apply: DONE kept, turned into TODO (verification failed), or dropped (conflict). */
  updates: AgentTaskUpdate[];
  /** Blocker signals to raise (merge conflicts). */
  conflicts: ConflictSignal[];
  /** Conflict signals to clear: the task merged now. */
  resolved: string[];
  /** Tasks whose branch merged: their worktree and branch go once the DONE is recorded. */
  merged: string[];
  /** The commit merged of each of those: its branch is deleted only while it still points there. */
  mergedTips: Record<string, string>;
}

export function conflictSignalKey(stepId: string): string {
  return `merge_conflict_${taskNumber(stepId) ?? stepId}`;
}

async function runInfo(pool: pg.Pool, runId: string): Promise<RunInfo> {
  const rows = await pool.query<RunInfo>(
    "select id, plan_id, trace_id, plan_version, workspace_root from runs where id = $1",
    [runId],
  );
  return rows.rows[0]!;
}

/** One merge at a time per run: two tasks reported DONE together merge one after the other. */
function withRunLock<T>(pool: pg.Pool, runId: string, work: () => Promise<T>): Promise<T> {
  return withAdvisoryLock(pool, `stepwise-worktrees:${runId}`, work);
}

async function appendTaskEvent(
  pool: pg.Pool,
  run: RunInfo,
  event: { type: "task.verified" | "task.merged" | "task.merge_conflict"; stepId: string; data: object },
): Promise<void> {
  await inTransaction(pool, async (client) => {
    await appendEvents(client, { streamId: run.id, planId: run.plan_id, runId: run.id, traceId: run.trace_id }, [
      { type: event.type, stepId: event.stepId, data: event.data as never },
    ]);
  });
}

function taskLabel(step: Step): string {
  const number = taskNumber(step.id);
  return `${number === null ? `Step ${step.id}` : `Task ${number}`}${step.title ? `: ${step.title}` : ""}`;
}

/**
 * The task's branch merged into the integration branch. Its pending work was committed already
 * when verifiers ran on it; otherwise it is committed here, in the same sandboxed launch.
 */
async function mergeTask(
  repo: WorkspaceRepo,
  runId: string,
  step: Step,
  committed: boolean,
  actor: string,
): Promise<MergeOutcome> {
  const merge = `Merge ${taskLabel(step)}`.slice(0, 200);
  if (committed) return mergeTaskBranch(repo, runId, step.id, merge);
  const commit = taskLabel(step).slice(0, 200);
  return (await commitAndMergeTaskBranch(repo, runId, step.id, { commit, merge, author: actor })).merge;
}

/** The DONEs of agent tasks not completed yet: the only updates a DONE's integration touches. */
export function finishingUpdates(
  byId: ReadonlyMap<string, Step>,
  statuses: ReadonlyMap<string, StepStatus>,
  updates: AgentTaskUpdate[],
): AgentTaskUpdate[] {
  return updates.filter(
    (update) =>
      update.status === "DONE" &&
      byId.get(update.stepId)?.tool === AGENT_TASK_TOOL &&
      statuses.get(update.stepId) !== "completed",
  );
}

/** The task's verifiers, run in `cwd` and recorded (`task.verified`): their findings when one failed. */
async function verifyTask(
  pool: pg.Pool,
  run: RunInfo,
  step: Step,
  options: { cwd: string; actor: string; tools: ToolRegistry; authorize: () => Promise<void>; stop?: AbortSignal },
): Promise<string | undefined> {
  // Approved as the engine's gate counts it: the run's approver policy, this exact definition.
  const approved = await stepApprovedUnderPolicy(
    pool,
    options.tools,
    { id: run.id, planId: run.plan_id, planVersion: run.plan_version, workspaceRoot: run.workspace_root },
    step.id,
  );
  const attempt = await pool.query<{ attempt: number }>(
    "select attempt from run_steps where run_id = $1 and step_id = $2",
    [run.id, step.id],
  );
  await options.authorize();
  const outcome = await runVerifiers({
    step,
    runId: run.id,
    cwd: options.cwd,
    attempt: attempt.rows[0]?.attempt ?? 1,
    approvedByPerson: approved,
    ...(options.stop && { stop: options.stop }),
  });
  // Stopped under way: no finding to record, the work is not wanted any more.
  options.stop?.throwIfAborted();
  await appendTaskEvent(pool, run, {
    type: "task.verified",
    stepId: step.id,
    data: { passed: outcome.passed, agent: options.actor, results: outcome.results },
  });
  return outcome.passed ? undefined : findingsNote(outcome.results);
}

/**
 * Runs before the updates are recorded; `statuses` are the steps' states as loaded, `steps` the
 * run's plan version. Only DONE updates of agent tasks are touched.
 */
export async function prepareTaskUpdates(
  pool: pg.Pool,
  input: {
    runId: string;
    steps: Step[];
    statuses: Map<string, StepStatus>;
    updates: AgentTaskUpdate[];
    actor: string;
    tools: ToolRegistry;
    /**
     * Asked right before each effect (the commit, the verifiers, the merge, under the run's merge
     * lock): throws when the reporter may no longer do it. A report integrated later asks it.
     */
    authorize?: () => Promise<void>;
    /** Aborts when the work is no longer wanted (its run cancelled): a verifier under way ends. */
    stop?: AbortSignal;
  },
): Promise<PreparedUpdates> {
  const authorize = input.authorize ?? (async () => undefined);
  const prepared: PreparedUpdates = { updates: [], conflicts: [], resolved: [], merged: [], mergedTips: {} };
  const byId = new Map(input.steps.map((step) => [step.id, step]));
  const finishing = finishingUpdates(byId, input.statuses, input.updates);
  if (finishing.length === 0) return { ...prepared, updates: input.updates };
  const run = await runInfo(pool, input.runId);
  const repo = await workspaceRepository(run.workspace_root);
  const replaced = new Map<string, AgentTaskUpdate | null>();
  for (const update of finishing) {
    const step = byId.get(update.stepId)!;
    const hasWorktree = repo !== undefined && (await taskWorktreeExists(repo, run.id, step.id));
    const cwd = hasWorktree ? path.join(repo.root, worktreeRelativePath(run.id, step.id)) : run.workspace_root;
    const verifying = verifierCommands(step.args).length > 0;
    // Verifiers check the committed work; without them committing and merging is one launch (below).
    if (hasWorktree && verifying) {
      await authorize();
      await commitPendingWork(repo, run.id, step.id, `${taskLabel(step)}`.slice(0, 200), input.actor);
    }

    if (verifying) {
      const findings = await verifyTask(pool, run, step, {
        cwd,
        actor: input.actor,
        tools: input.tools,
        authorize,
        ...(input.stop && { stop: input.stop }),
      });
      if (findings !== undefined) {
        replaced.set(step.id, { stepId: step.id, status: "TODO", note: findings });
        continue;
      }
    }

    if (!hasWorktree) continue;
    const merge = await withRunLock(pool, run.id, async () => {
      await authorize();
      return mergeTask(repo, run.id, step, verifying, input.actor);
    });
    if (merge.kind === "conflict") {
      const worktree = worktreeRelativePath(run.id, step.id);
      const files = merge.files.length > 0 ? merge.files.join(", ") : "(git named none)";
      prepared.conflicts.push({
        key: conflictSignalKey(step.id),
        taskId: taskNumber(step.id),
        message:
          `${taskLabel(step)} does not merge into ${integrationBranch(run.id)}: conflicts in ${files}. ` +
          `Resolve them in ${worktree} (run \`git merge ${integrationBranch(run.id)}\` there, fix the files, commit), ` +
          "then report the task DONE again.",
      });
      await appendTaskEvent(pool, run, {
        type: "task.merge_conflict",
        stepId: step.id,
        data: { files: merge.files, branch: integrationBranch(run.id) },
      });
      replaced.set(step.id, null);
      continue;
    }
    prepared.merged.push(step.id);
    prepared.mergedTips[step.id] = merge.tip;
    prepared.resolved.push(conflictSignalKey(step.id));
    await appendTaskEvent(pool, run, {
      type: "task.merged",
      stepId: step.id,
      data: {
        commit: merge.commit,
        branch: integrationBranch(run.id),
        fastForward: merge.kind === "merged" ? merge.fastForward : true,
      },
    });
  }
  prepared.updates = input.updates.flatMap((update) => {
    const swap = replaced.get(update.stepId);
    if (swap === undefined) return [update];
    return swap === null ? [] : [swap];
  });
  return prepared;
}

/**
 * After the updates are recorded: a task just taken (IN_PROGRESS) gets its worktree (if the
 * status that handed it out did not make it already), and a merged task's worktree and branch
 * go — after the call, in the background (worktrees-ahead.ts), as does a completed run's
 * integration checkout. Cleanup is best effort — a leftover worktree is removed with the run's —
 * and never fails the agent's update, which is already recorded.
 */
export async function afterTaskUpdates(
  pool: pg.Pool,
  input: { runId: string; updates: AgentTaskUpdate[]; merged: string[]; mergedTips?: Record<string, string> },
): Promise<void> {
  const starting = input.updates.filter((update) => update.status === "IN_PROGRESS");
  if (starting.length === 0 && input.merged.length === 0) return;
  const run = await runInfo(pool, input.runId);
  if (input.merged.length > 0) {
    // A run completed by a later tool step is swept when the next session starts in the workspace
    // (removeWorktreesOfFinishedRuns).
    removeMergedWorktreesLater(
      pool,
      run,
      input.merged.map((stepId) => ({ stepId, tip: input.mergedTips?.[stepId] })),
    );
  }
  if (starting.length === 0) return;
  const repo = await workspaceRepository(run.workspace_root);
  if (!repo) return;
  for (const update of starting) await ensureTaskWorktree(repo, run.id, update.stepId);
}

/** On cancel (and on recovery of a run that ends): the run's worktrees go. Returns their paths. */
export async function removeWorktreesOfRun(pool: pg.Pool, runId: string): Promise<string[]> {
  const rows = await pool.query<{ workspace_root: string }>("select workspace_root from runs where id = $1", [runId]);
  const root = rows.rows[0]?.workspace_root;
  if (!root) return [];
  await worktreeWorkDone(root);
  // Undecided now (a busy machine): the run's worktrees go with the next session's sweep.
  const repo: WorkspaceRepo | undefined = await workspaceRepository(root, { whenUndecided: "none" });
  if (!repo) return [];
  return removeRunWorktrees(repo, runId);
}

/** The latest verification of each task of a run, for the run page and the agent's brief. */
export async function latestVerifications(
  pool: pg.Pool,
  runId: string,
): Promise<Map<string, { passed: boolean; results: VerifierResult[]; at: string }>> {
  const rows = await pool.query<{
    step_id: string;
    data: { passed: boolean; results: VerifierResult[] };
    created_at: Date;
  }>("select step_id, data, created_at from events where stream_id = $1 and type = 'task.verified' order by seq", [
    runId,
  ]);
  return new Map(
    rows.rows.map((row) => [
      row.step_id,
      { passed: row.data.passed, results: row.data.results, at: row.created_at.toISOString() },
    ]),
  );
}

/**
 * Recovery of leftovers: worktrees of this workspace's runs that are over (cancelled or failed by
 * a path that did not clean up, or a process that stopped between cancel and cleanup) are
 * removed. Run when a session starts in the workspace. Completed runs keep nothing to recover
 * either: their integration checkout goes too; the branches stay.
 */
export async function removeWorktreesOfFinishedRuns(pool: pg.Pool, workspaceRoot: string): Promise<string[]> {
  await worktreeWorkDone(workspaceRoot);
  const repo = await workspaceRepository(workspaceRoot, { whenUndecided: "none" });
  if (!repo) return [];
  const shorts = await runsWithWorktrees(repo);
  if (shorts.length === 0) return [];
  const runs = await pool.query<{ id: string }>(
    `select id from runs where status = any($2)
       and left(replace(id::text, '-', ''), 8) = any($1)`,
    [shorts, FINISHED_RUN_STATUSES],
  );
  const removed: string[] = [];
  for (const run of runs.rows) removed.push(...(await removeRunWorktrees(repo, run.id)));
  return removed;
}
