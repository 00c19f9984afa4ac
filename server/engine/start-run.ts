import { randomUUID } from "node:crypto";
import type pg from "pg";
import type { QueryResult } from "pg";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { actorKindOf } from "../caller-context";
import { workspacePolicy } from "../people/approver-policy";
import { planAuthors, principalNow } from "../policy/facts";
import type { Step, StepStatus } from "../plan-schema";
import { assertPlanMayRun, planMayRunRead } from "../plans/lifecycle";
import { validatePlan } from "../plans/validate";
import { advance } from "./advance";
import { claimContinuations, ContinuationClaims } from "./claim";
import { startContinuations } from "./step-runner";
import type { EngineDeps } from "./deps";
import { audit, openRunTransaction, RUN_COLUMNS } from "./run-transaction";

export interface StartRunInput {
  planId: string;
  version: number;
  actor: string;
  /** The approver's note: stored with the run, audited, and given to the agent that executes it. */
  note?: string;
  workspaceRoot: string;
  /** The registered workspace at `workspaceRoot`; read `for share`, so it cannot be removed meanwhile. */
  workspaceId?: string | null;
  maxParallel?: number;
  /** How long gated steps wait for a decision (default 30 minutes) and when to warn before. */
  approvalTimeoutMs?: number;
  approvalWarningMs?: number;
  /** Recovery proposals for failed steps: decided by a person (`ask`, default) or applied by policy (`auto`). */
  recoveryPolicy?: RecoveryPolicy;
  /** Re-run: these steps are not executed again; their recorded results are copied from `fromRunId`. */
  reuse?: { fromRunId: string; stepIds: string[] };
  /** A sub-plan: the run and `run_plan` step that start this run (server/engine/child-runs.ts). */
  parent?: { runId: string; stepId: string };
}

export const RECOVERY_POLICIES = ["ask", "auto"] as const;
export type RecoveryPolicy = (typeof RECOVERY_POLICIES)[number];

export const DEFAULT_APPROVAL_TIMEOUT_MS = 30 * 60_000;
export const DEFAULT_APPROVAL_WARNING_MS = 5 * 60_000;

/** Approving a plan version starts a run of exactly that version. */
export async function startRun(deps: EngineDeps, input: StartRunInput): Promise<{ runId: string; traceId: string }> {
  const runId = randomUUID();
  // One trace per plan: its versions, its events and every run of it share the plan's trace id,
  // so one id finds everything (seed 001's observability).
  let traceId = "";
  // Root steps this process claims to run itself (see below).
  const worker = deps.localWorker;
  const local = new ContinuationClaims(worker?.continuationSlots);
  // The plan's lock and the version, read in the round trip that begins the transaction.
  const openWith = [
    planMayRunRead(input.planId),
    {
      text: "select trace_id, steps from plan_versions where plan_id = $1 and version = $2",
      values: [input.planId, input.version],
    },
  ];
  try {
    await inTransaction(
      deps.pool,
      async (client, opened, commitWith) => {
        const claimed = local.nextTry();
        assertPlanMayRun(opened![0]!);
        const version = opened![1] as QueryResult<{ trace_id: string | null; steps: Step[] }>;
        traceId = version.rows[0]?.trace_id ?? randomUUID();
        if (input.workspaceId) await assertWorkspaceMayRun(deps, client, input, input.workspaceId);
        if (version.rowCount === 0) {
          throw new AppError("not_found", `Plan ${input.planId} has no version ${input.version}`);
        }
        const steps = version.rows[0]!.steps;
        const issues = validatePlan({ steps }, deps.tools);
        if (issues.length > 0) throw new AppError("invalid_plan", "The plan is not valid and cannot run", issues);
        const reused = new Set(input.reuse?.stepIds);
        const initial: StepStatus[] = steps.map((step) =>
          reused.has(step.id) ? "completed" : step.skipped ? "skipped" : "pending",
        );
        const run = await insertRun(client, { runId, traceId, input, steps, initial, reused });
        // The graph of the steps just read: the transaction below and the run's later ones find it
        // cached rather than reading the version again.
        await deps.graphs.get(input.planId, input.version, async () => steps);
        const tx = (await openRunTransaction(deps, client, runId, { locked: run }))!;
        // Every step row was written just now, none of them ready: the hot path's in-memory dispatch
        // (see RunTransaction.readyAtLock) applies, and the status changes below go with the write-back.
        tx.deferStepWrites = true;
        tx.readyAtLock = { rows: [], complete: true };
        steps.forEach((step, index) => tx.knownRows.set(step.id, { attempt: 0, queued: false, position: index }));
        await audit(tx, input.actor, "plan.approved", null, {
          workspace: input.workspaceRoot,
          ...(input.note && { note: input.note }),
          ...(input.reuse && { rerunOf: input.reuse.fromRunId }),
          ...(input.parent && { parentRunId: input.parent.runId, parentStepId: input.parent.stepId }),
        });
        tx.events.push({
          type: "run.started",
          data: {
            status: "running",
            planVersion: input.version,
            approvedBy: input.actor,
            ...(input.reuse && { rerunOf: input.reuse.fromRunId }),
            steps: steps.map((s, index) => ({ id: s.id, status: initial[index]! })),
          },
        });
        steps.forEach((step, index) => tx.statuses.set(step.id, initial[index]!));
        // Roots have no dependencies to wait for; evaluate them like any dependent.
        const roots = steps
          .filter((s, index) => initial[index] === "pending" && s.dependsOn.length === 0)
          .map((s) => s.id);
        await advance(
          tx,
          steps.filter((s, index) => initial[index] !== "pending").map((s) => s.id),
          roots,
        );
        // A process that runs steps starts the first ones itself, as far as its worker has
        // continuation slots, claimed in this transaction like any continuation: the queue's
        // hand-out of a wide first layer (a poll per worker slot) was a tenth of a short run. The
        // rest are queued.
        if (worker) claimed.push(...(await claimContinuations(worker, tx, new Map())));
        await tx.flush(commitWith);
      },
      // The first steps claimed here are this process's to start: a commit whose answer was lost
      // is asked about (the run exists, its claims stand), never taken for a rollback.
      { openWith, settleLostCommit: { shouldStop: () => deps.stopping === true } },
    );
  } catch (error) {
    local.release();
    throw error;
  }
  if (worker) startContinuations(worker, local.committed);
  return { runId, traceId };
}

/**
 * The plan's workspace must still be registered (read `for share`, so it cannot be removed
 * meanwhile), and its approver policy may keep the plan's authors from approving it.
 */
async function assertWorkspaceMayRun(
  deps: EngineDeps,
  client: pg.PoolClient,
  input: StartRunInput,
  workspaceId: string,
) {
  const workspace = await client.query("select 1 from workspaces where id = $1 and removed_at is null for share", [
    workspaceId,
  ]);
  if (workspace.rowCount === 0) throw new AppError("invalid_state", "The plan's workspace was removed");
  // The approver policy's other half: no one who wrote a version of the plan up to this one
  // approves it to run (server/policy/authority.ts). An agent starting its own session's
  // run proposes rather than approves; the same author rule holds for it.
  const policy = await workspacePolicy(client, workspaceId);
  const kind = actorKindOf(input.actor);
  // An agent starts only its own session's run, and only as `session.start` allows: asked
  // whatever the policy. A person's start is the plan approval the door already checked by
  // role; here only the author rule remains to ask, when the policy excludes authors.
  if (kind !== "agent" && policy.authorMayApprove) return;
  const principal = await principalNow(client, input.actor, kind);
  const authors = policy.authorMayApprove ? [] : await planAuthors(client, input.planId, input.version);
  const action = principal.kind === "agent" ? "session.start" : "plan.approve";
  const decision = deps.authority.authorize(principal, action, { policy, authors });
  if (!decision.allowed && decision.rule === "authors-may-not-approve") {
    throw new AppError(
      "forbidden",
      `${input.actor} wrote a version of this plan (up to version ${input.version}) and may not approve it (the workspace's approver policy); another approver must`,
      { author: input.actor, authors },
    );
  }
  if (!decision.allowed && principal.kind === "agent") {
    throw new AppError("forbidden", `${input.actor} may not start this run: ${decision.reason}`, {
      rule: decision.rule,
    });
  }
}

/** Writes the run and its step rows, copying the reused results of an earlier run; returns the run row. */
async function insertRun(
  client: pg.PoolClient,
  {
    runId,
    traceId,
    input,
    steps,
    initial,
    reused,
  }: {
    runId: string;
    traceId: string;
    input: StartRunInput;
    steps: Step[];
    initial: StepStatus[];
    reused: Set<string>;
  },
): Promise<QueryResult> {
  // The run and its steps in one statement, returning the run as the engine's lock reads it
  // (the new row is this transaction's alone).
  const run = await client.query(
    `with run as (
    insert into runs (id, plan_id, plan_version, status, max_parallel, trace_id, approved_by, workspace_root,
                      open_steps, active_steps, started_at, approval_timeout_ms, approval_warning_ms, rerun_of,
                      workspace_id, recovery_policy, approval_note, parent_run_id, parent_step_id)
    values ($1, $2, $3, 'running', $4, $5, $6, $7, $8, 0, now(), $9, $10, $11, $12, $13, $14, $16, $17)
    returning ${RUN_COLUMNS}
  ),
  steps as (
    insert into run_steps (run_id, step_id, position, tool, status, depends_on, reason)
    select $1, s.id, s.position, s.tool, s.status, s.depends_on, s.reason
    from jsonb_to_recordset($15::jsonb)
      as s(id text, position int, tool text, status text, depends_on text[], reason text)
  )
  select * from run`,
    [
      runId,
      input.planId,
      input.version,
      input.maxParallel ?? 8,
      traceId,
      input.actor,
      input.workspaceRoot,
      initial.filter((s) => s === "pending").length,
      input.approvalTimeoutMs ?? DEFAULT_APPROVAL_TIMEOUT_MS,
      input.approvalWarningMs ?? DEFAULT_APPROVAL_WARNING_MS,
      input.reuse?.fromRunId ?? null,
      input.workspaceId ?? null,
      input.recoveryPolicy ?? "ask",
      input.note || null,
      JSON.stringify(
        steps.map((step, index) => ({
          id: step.id,
          position: index,
          tool: step.tool,
          status: initial[index],
          depends_on: step.dependsOn,
          reason: reused.has(step.id)
            ? `Result reused from run ${input.reuse!.fromRunId}`
            : step.skipped
              ? "Skipped by the reviewer"
              : null,
        })),
      ),
      input.parent?.runId ?? null,
      input.parent?.stepId ?? null,
    ],
  );
  if (input.reuse && reused.size > 0) {
    // Only results that succeeded are reused; anything else would make the new run lie.
    const copied = await client.query(
      `update run_steps rs set result = old.result, attempt = old.attempt, progress = 100,
      started_at = old.started_at, finished_at = old.finished_at
    from run_steps old
    where rs.run_id = $1 and old.run_id = $2 and old.step_id = rs.step_id and rs.step_id = any($3)
      and old.status = 'completed' and (old.result->>'ok')::boolean`,
      [runId, input.reuse.fromRunId, [...reused]],
    );
    if (copied.rowCount !== reused.size) {
      throw new AppError("invalid_state", "Only completed steps of the earlier run can be reused");
    }
  }
  return run;
}
