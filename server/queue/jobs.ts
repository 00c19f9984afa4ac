import { createHash } from "node:crypto";
import type pg from "pg";
import type { Statement } from "../db";
import { FINISHED_RUN_STATUSES, isIn, type RunStatus } from "../vocabulary";

/** Executes one attempt of one step. */
export const RUN_STEP_TASK = "run_step";
/** Announces that a pending approval expires soon (`approval.expiring`). */
export const APPROVAL_WARNING_TASK = "approval_expiring";
/** Skips a gated step nobody decided on in time. */
export const APPROVAL_EXPIRY_TASK = "approval_expire";

/** Asks the planner for a recovery of a failed step and applies it (runs whose policy is `auto`). */
export const AUTO_RECOVERY_TASK = "auto_recover";

/** Sub-plans (server/engine/child-runs.ts): a `run_plan` step's child run is started … */
export const START_CHILD_RUN_TASK = "start_child_run";
/** … its end is recorded on the parent step … */
export const CHILD_RUN_FINISHED_TASK = "child_run_finished";
/** … and a parent run cancelled or failed stops its children. */
export const CANCEL_CHILD_RUNS_TASK = "cancel_child_runs";

/** Any other job a state change calls for, queued in its transaction. */
export interface QueueJob {
  task: string;
  payload: Record<string, unknown>;
  /** Graphile's job key: a second job with the same key replaces the first instead of adding one. */
  key: string;
}

const QUEUE_ATTEMPTS = 5;

export interface StepJob {
  runId: string;
  stepId: string;
  /** The attempt this job will make; part of the job key so retries never collide. */
  attempt: number;
  runAt?: Date;
  /** A second job for the same attempt, replacing one stranded by a dead worker. */
  requeued?: boolean;
  /**
   * The workspace path the step acts in: only workers serving it take the job (see
   * `stepTaskFor`). Undefined for a step that touches no workspace: any worker takes it.
   */
  workspace?: string;
}

/**
 * The queue task of a step job. A step acting in a workspace is queued under a task of that
 * workspace (`run_step@<key>`), and a worker lists among its tasks only those of the workspaces
 * it serves, so graphile-worker's own claim (`task_id = any(…)`) hands the job only to such a
 * worker — no check after the claim, and no job taken by a worker that would have to give it back.
 */
export function stepTaskFor(workspace: string | undefined): string {
  return workspaceTaskFor(RUN_STEP_TASK, workspace);
}

/** `task` routed to a workspace (`<task>@<key>`), or `task` itself for work that touches none. */
export function workspaceTaskFor(task: string, workspace: string | undefined): string {
  return workspace === undefined ? task : `${task}@${workspaceQueueKey(workspace)}`;
}

/**
 * A workspace path's key in task names: a hash, since a path may be longer than a task name may
 * be (128 characters). In SQL: `left(encode(sha256(convert_to(path, 'UTF8')), 'hex'), 24)`.
 */
export function workspaceQueueKey(workspace: string): string {
  let key = queueKeys.get(workspace);
  if (key === undefined) {
    key = createHash("sha256").update(workspace, "utf8").digest("hex").slice(0, 24);
    // Every step job asks: remember the few paths a process sees rather than hash each time.
    if (queueKeys.size >= 1_000) queueKeys.clear();
    queueKeys.set(workspace, key);
  }
  return key;
}
const queueKeys = new Map<string, string>();

/**
 * Agent workspace work (a task's worktree, a DONE's verifiers and merge) asked of a worker serving
 * the workspace by a process that serves none (server/agents/workspace-calls.ts): queued under the
 * workspace's own task (`agent_workspace@<key>`, routed like its steps). The payload is the call's id only:
 * the worker reads what to do from the call's row and the rows it names.
 */
export const AGENT_WORKSPACE_TASK = "agent_workspace";

/** Queues one agent workspace call for the workers serving `workspace`. */
export function enqueueAgentWorkspaceCall(
  client: Pick<pg.ClientBase, "query">,
  call: { id: string; workspace: string },
): Promise<void> {
  return addJobs(client, [
    {
      task: workspaceTaskFor(AGENT_WORKSPACE_TASK, call.workspace),
      payload: { callId: call.id },
      run_at: null,
      job_key: `${AGENT_WORKSPACE_TASK}:${call.id}`,
    },
  ]);
}

/** A timer on a waiting approval; `expiresAt` ties it to one wait, so a stale timer does nothing. */
export interface ApprovalTimerJob {
  task: typeof APPROVAL_WARNING_TASK | typeof APPROVAL_EXPIRY_TASK;
  runId: string;
  stepId: string;
  expiresAt: string;
  runAt: Date;
}

interface JobSpec {
  task: string;
  payload: Record<string, unknown>;
  run_at: string | null;
  job_key: string;
}

/**
 * Enqueues jobs on graphile-worker inside the caller's transaction, so a job exists if and only if
 * the state change that called for it commits.
 */
async function addJobs(client: Pick<pg.ClientBase, "query">, specs: JobSpec[]): Promise<void> {
  const statement = addJobsStatement(specs);
  if (statement) await client.query(statement.text, statement.values);
}

/** The statement that enqueues `specs` (undefined for none), for callers that send it with others. */
function addJobsStatement(specs: JobSpec[]): Statement | undefined {
  if (specs.length === 0) return undefined;
  return {
    text: `select count(*)::int as queued from graphile_worker.add_jobs(array(
       select row(j.task, j.payload::json, null::text, j.run_at, $2::int, j.job_key, null::int, null::text[])::graphile_worker.job_spec
       from jsonb_to_recordset($1::jsonb) as j(task text, payload jsonb, run_at timestamptz, job_key text)
     ))`,
    // Queue-level attempts cover infrastructure failures (a lost connection while recording);
    // the engine's own retry policy decides about tool errors.
    values: [JSON.stringify(specs), QUEUE_ATTEMPTS],
  };
}

export async function enqueueStepJobs(client: Pick<pg.ClientBase, "query">, jobs: StepJob[]): Promise<void> {
  await addJobs(client, stepJobSpecs(jobs));
}

/** `enqueueStepJobs` as a statement (undefined for no jobs), with any `others` in the same statement. */
export function stepJobsStatement(jobs: StepJob[], others: QueueJob[] = []): Statement | undefined {
  return addJobsStatement([
    ...stepJobSpecs(jobs),
    ...others.map((job) => ({ task: job.task, payload: job.payload, run_at: null, job_key: job.key })),
  ]);
}

function stepJobSpecs(jobs: StepJob[]): JobSpec[] {
  return jobs.map((job) => ({
    task: stepTaskFor(job.workspace),
    payload: { runId: job.runId, stepId: job.stepId, attempt: job.attempt },
    run_at: job.runAt?.toISOString() ?? null,
    job_key: `${job.runId}:${job.stepId}:${job.attempt}${job.requeued ? ":requeued" : ""}`,
  }));
}

/** The statement that enqueues approval timers (undefined for none), sent with the engine's write-back. */
export function approvalTimersStatement(jobs: ApprovalTimerJob[]): Statement | undefined {
  return addJobsStatement(
    jobs.map((job) => ({
      task: job.task,
      payload: { runId: job.runId, stepId: job.stepId, expiresAt: job.expiresAt },
      run_at: job.runAt.toISOString(),
      job_key: `${job.task}:${job.runId}:${job.stepId}:${job.expiresAt}`,
    })),
  );
}

/** The failed attempt an automatic recovery is about; the job key makes one job per attempt. */
export interface AutoRecoveryJob {
  runId: string;
  stepId: string;
  attempt: number;
}

export function enqueueAutoRecovery(client: Pick<pg.ClientBase, "query">, job: AutoRecoveryJob): Promise<void> {
  return addJobs(client, [
    {
      task: AUTO_RECOVERY_TASK,
      payload: { ...job },
      run_at: null,
      job_key: `${AUTO_RECOVERY_TASK}:${job.runId}:${job.stepId}:${job.attempt}`,
    },
  ]);
}

/** NOTIFY channel (the `workspaces` table's trigger): a workspace was registered, changed or removed. */
export const WORKSPACES_CHANNEL = "stepwise_workspaces";

/** NOTIFY channel carrying the id of a cancelled run, so every worker aborts its running steps. */
export const CANCEL_CHANNEL = "stepwise_cancel";

/**
 * Runs (or resumes) one planning session's loop: server/planner/session-jobs.ts. Queued under its
 * workspace's task (`planning_session@<key>`, like steps); the plain name is a job queued before
 * sessions were routed, which the handler queues again under its workspace's task.
 */
export const PLANNING_TASK = "planning_session";
/** Cancels a planning session whose question nobody answered in time. */
export const PLANNING_TIMEOUT_TASK = "planning_answer_timeout";

/**
 * Queues a planning session's loop, for a worker serving `workspace` (the session reads its files).
 * One key per session: adding it again while a job waits replaces that job (task included), and
 * while one is running (locked) graphile queues a fresh one.
 */
export function enqueuePlanningJob(
  client: Pick<pg.ClientBase, "query">,
  sessionId: string,
  workspace: string,
): Promise<void> {
  return addJobs(client, [
    {
      task: workspaceTaskFor(PLANNING_TASK, workspace),
      payload: { sessionId },
      run_at: null,
      job_key: `planning:${sessionId}`,
    },
  ]);
}

/** The timer on one planning question; it does nothing once the question is answered. */
export function enqueuePlanningTimeout(
  client: Pick<pg.ClientBase, "query">,
  job: { sessionId: string; questionId: string; runAt: Date },
): Promise<void> {
  return addJobs(client, [
    {
      task: PLANNING_TIMEOUT_TASK,
      payload: { sessionId: job.sessionId, questionId: job.questionId },
      run_at: job.runAt.toISOString(),
      job_key: `planning-timeout:${job.questionId}`,
    },
  ]);
}

/** Turns events that may interest outgoing webhooks into deliveries (server/webhooks/fanout.ts). */
export const WEBHOOK_FANOUT_TASK = "webhook_fanout";
/** One attempt of one webhook delivery (server/webhooks/deliver.ts). */
export const WEBHOOK_DELIVER_TASK = "webhook_deliver";

/**
 * The event types an outgoing webhook may be told about. Appending any of them queues one fanout
 * job in the same transaction (server/events/store.ts), and only while an endpoint is enabled.
 */
export const WEBHOOK_TRIGGER_TYPES: readonly string[] = [
  "approval.requested",
  "input.requested",
  "run.completed",
  "run.failed",
  "planning.question",
  "planning.completed",
  "signal.raised",
];

/**
 * The query that queues the fanout of a stream's events `fromSeq..toSeq` (SQL expressions over
 * `from`), for the statement appending them (server/events/store.ts), so that the job exists
 * exactly when the events do — and only while some webhook endpoint is enabled: no job at all for
 * an installation without webhooks. `bind(value)` returns a parameter's placeholder.
 */
export function webhookFanoutQuery(
  bind: (value: unknown) => string,
  range: { streamId: string; fromSeq: string; toSeq: string; from: string },
): string {
  const task = bind(WEBHOOK_FANOUT_TASK);
  return `select graphile_worker.add_job(${task}::text,
      json_build_object('streamId', ${range.streamId}, 'fromSeq', ${range.fromSeq}, 'toSeq', ${range.toSeq}),
      job_key := ${task}::text || ':' || ${range.streamId} || ':' || (${range.fromSeq})::text,
      max_attempts := ${bind(QUEUE_ATTEMPTS)}::int)
    from ${range.from} where exists (select 1 from webhook_endpoints where enabled)`;
}

/** Queues one attempt of a delivery, at `runAt` (a retry's backoff) or now. */
export function enqueueWebhookDelivery(
  client: Pick<pg.ClientBase, "query">,
  job: { deliveryId: string; attempt: number; runAt?: Date },
): Promise<void> {
  return addJobs(client, [
    {
      task: WEBHOOK_DELIVER_TASK,
      payload: { deliveryId: job.deliveryId, attempt: job.attempt },
      run_at: job.runAt?.toISOString() ?? null,
      job_key: `${WEBHOOK_DELIVER_TASK}:${job.deliveryId}:${job.attempt}`,
    },
  ]);
}

/**
 * Jobs a run's end calls for, queued with the change that ends it: a sub-plan's run tells its
 * parent step, and a run cancelled or failed stops the child runs it started (child-runs.ts).
 */
export function runEndedJobs(
  run: { id: string; status: RunStatus; parent_run_id: string | null; parent_step_id: string | null },
  openedWith: RunStatus,
): QueueJob[] {
  if (run.status === openedWith || !isIn(FINISHED_RUN_STATUSES, run.status)) return [];
  const jobs: QueueJob[] = [];
  if (run.parent_run_id && run.parent_step_id) {
    jobs.push({
      task: CHILD_RUN_FINISHED_TASK,
      payload: { parentRunId: run.parent_run_id, parentStepId: run.parent_step_id, childRunId: run.id },
      key: `${CHILD_RUN_FINISHED_TASK}:${run.id}`,
    });
  }
  if (run.status !== "completed") {
    jobs.push({
      task: CANCEL_CHILD_RUNS_TASK,
      payload: { runId: run.id, status: run.status },
      key: `${CANCEL_CHILD_RUNS_TASK}:${run.id}`,
    });
  }
  return jobs;
}
