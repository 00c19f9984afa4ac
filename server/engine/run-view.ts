import { PRISMA_TRANSACTION_OPTIONS, prismaQueryable } from "../db";
import type { PrismaClient } from "../generated/prisma/client";
import { AppError } from "../errors";
import type { ToolRegistry } from "../tools/registry";
import { z } from "zod";
import { approvalViewSchema, describeApprovals } from "./approval-view";
import type { StepStatus } from "../plan-schema";
import { runStatusSchema, stepResultSchema, stepStatusSchema, type StepResult } from "../vocabulary";
import { stepWaitingSchema, type StepWaiting } from "./run-transaction";
import type { RunStatus } from "./state-machine";

/** A step of a run as every interface shows it. The schema is the type (operations parse with it). */
export const runStepViewSchema = z.object({
  stepId: z.string(),
  status: stepStatusSchema,
  attempt: z.number(),
  progress: z.number(),
  result: stepResultSchema.nullable(),
  error: z.string().nullable(),
  reason: z.string().nullable(),
  /** What an awaiting_approval / awaiting_input step waits for (expiry, question, choices). */
  waiting: stepWaitingSchema.optional(),
  /** awaiting_approval: exactly what an approval would let run, computed (see approval-view.ts). */
  approval: approvalViewSchema.optional(),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  /** The worker process that runs or ran the step's latest attempt (host · pid), when known. */
  worker: z.string().nullable(),
});
export type RunStepView = z.output<typeof runStepViewSchema>;

export const runViewSchema = z.object({
  id: z.string(),
  planId: z.string(),
  planVersion: z.number(),
  status: runStatusSchema,
  traceId: z.string(),
  approvedBy: z.string(),
  /** The approver's note on the plan, when they gave one (the executing agent is shown it too). */
  approvalNote: z.string().optional().describe("The approver's note on the plan, when they gave one"),
  maxParallel: z.number(),
  /** `auto`: failed steps get a recovery proposal applied by policy (bounded); `ask`: a person decides. */
  recoveryPolicy: z.enum(["ask", "auto"]).optional(),
  workspace: z
    .object({ id: z.string().nullable(), name: z.string().nullable(), path: z.string() })
    .describe("The directory the run's tools act in"),
  /** The run this one re-runs from a chosen step, if any. */
  rerunOf: z.string().optional(),
  /** A sub-plan's run: the run and `run_plan` step that started it. */
  parent: z
    .object({ runId: z.string(), stepId: z.string() })
    .optional()
    .describe("A sub-plan's run: the run and run_plan step that started it"),
  createdAt: z.string(),
  startedAt: z.string().nullable(),
  finishedAt: z.string().nullable(),
  /**
   * When retention (STEPWISE_RETENTION_DAYS) removed this run's events and step logs: its steps'
   * states and results stay, its timeline and event log are empty (a task's merge and verification
   * events are kept).
   */
  eventsRemovedAt: z.string().optional(),
  lastSeq: z.number().describe("Read events after this sequence number to follow the run"),
  steps: z
    .array(runStepViewSchema)
    .describe(
      "Per step: stepId, status, attempt, progress, result, error, reason, waiting; a step awaiting approval also " +
        "carries `approval`: the tool, its arguments as written and resolved (resolvedArgs), workspace, timeout, the " +
        "computed risk and capability (assessment), the author's claims (authorSays) and the definitionHash to decide with",
    ),
});
export type RunView = z.output<typeof runViewSchema>;

/** A run in a plan's list of runs. */
export const planRunSchema = z.object({
  id: z.string(),
  planVersion: z.number(),
  status: runStatusSchema,
  approvedBy: z.string(),
  createdAt: z.string(),
  finishedAt: z.string().nullable(),
});

/** With `tools`, steps awaiting approval carry what would run (`approval`): every approval surface passes them. */
export async function getRun(prisma: PrismaClient, runId: string, tools?: ToolRegistry): Promise<RunView> {
  // One snapshot for both reads: under read committed, a step could finish between them and the
  // view would claim a lastSeq whose events its step states do not reflect (seen in the browser).
  const [run, stream] = await prisma.$transaction(
    [
      prisma.run.findUnique({ where: { id: runId }, include: { steps: { orderBy: { position: "asc" } } } }),
      prisma.eventStream.findUnique({ where: { id: runId } }),
    ],
    // Prisma's 2 s to start a transaction was not enough on a busy machine (load 40): the read failed.
    { isolationLevel: "RepeatableRead", ...PRISMA_TRANSACTION_OPTIONS },
  );
  if (!run) throw new AppError("not_found", `No run ${runId}`);
  // Worker rows stay after their process stops, so a finished step still names who ran it.
  const workerIds = [...new Set(run.steps.flatMap((step) => (step.workerId ? [step.workerId] : [])))];
  const workers = new Map(
    (await prisma.worker.findMany({ where: { id: { in: workerIds } } })).map((worker) => [
      worker.id,
      workerName(worker),
    ]),
  );
  const approvals = tools
    ? await describeApprovals(
        prismaQueryable(prisma),
        tools,
        { id: run.id, planId: run.planId, planVersion: run.planVersion, workspaceRoot: run.workspaceRoot },
        run.steps.filter((step) => step.status === "awaiting_approval").map((step) => step.stepId),
      )
    : undefined;
  const workspace = await prisma.workspace.findFirst({
    where: run.workspaceId ? { id: run.workspaceId } : { path: run.workspaceRoot },
  });
  return {
    id: run.id,
    planId: run.planId,
    planVersion: run.planVersion,
    status: run.status as RunStatus,
    traceId: run.traceId,
    approvedBy: run.approvedBy,
    ...(run.approvalNote && { approvalNote: run.approvalNote }),
    maxParallel: run.maxParallel,
    recoveryPolicy: run.recoveryPolicy === "auto" ? "auto" : "ask",
    workspace: { id: workspace?.id ?? null, name: workspace?.name ?? null, path: run.workspaceRoot },
    ...(run.rerunOf !== null && { rerunOf: run.rerunOf }),
    ...(run.parentRunId !== null &&
      run.parentStepId !== null && { parent: { runId: run.parentRunId, stepId: run.parentStepId } }),
    createdAt: run.createdAt.toISOString(),
    startedAt: run.startedAt?.toISOString() ?? null,
    finishedAt: run.finishedAt?.toISOString() ?? null,
    ...(run.eventsRemovedAt && { eventsRemovedAt: run.eventsRemovedAt.toISOString() }),
    lastSeq: stream?.lastSeq ?? 0,
    steps: run.steps.map((step) => ({
      stepId: step.stepId,
      status: step.status as StepStatus,
      attempt: step.attempt,
      progress: step.progress,
      result: step.result as StepResult | null,
      error: step.error,
      reason: step.reason,
      ...(step.waiting !== null && { waiting: step.waiting as unknown as StepWaiting }),
      ...(approvals?.has(step.stepId) && { approval: approvals.get(step.stepId)! }),
      startedAt: step.startedAt?.toISOString() ?? null,
      finishedAt: step.finishedAt?.toISOString() ?? null,
      worker: (step.workerId && workers.get(step.workerId)) ?? null,
    })),
  };
}

/** How a worker process is named to people: the same words `step.running` events carry. */
export function workerName(worker: { hostname: string; pid: number }): string {
  return `${worker.hostname} · pid ${worker.pid}`;
}

export async function listRuns(prisma: PrismaClient, planId: string): Promise<z.output<typeof planRunSchema>[]> {
  const runs = await prisma.run.findMany({ where: { planId }, orderBy: { createdAt: "desc" }, take: 50 });
  return runs.map((run) => ({
    id: run.id,
    planVersion: run.planVersion,
    status: run.status as RunStatus,
    approvedBy: run.approvedBy,
    createdAt: run.createdAt.toISOString(),
    finishedAt: run.finishedAt?.toISOString() ?? null,
  }));
}
