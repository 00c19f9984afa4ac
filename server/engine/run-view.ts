import { PRISMA_TRANSACTION_OPTIONS, prismaQueryable } from "../db";
import type { PrismaClient } from "../generated/prisma/client";
import { AppError } from "../errors";
import type { ToolRegistry } from "../tools/registry";
import { describeApprovals, type ApprovalView } from "./approval-view";
import type { StepStatus } from "../plan-schema";
import type { StepResult } from "../vocabulary";
import type { StepWaiting } from "./engine";
import type { RunStatus } from "./state-machine";

export interface RunStepView {
  stepId: string;
  status: StepStatus;
  attempt: number;
  progress: number;
  result: StepResult | null;
  error: string | null;
  reason: string | null;
  /** What an awaiting_approval / awaiting_input step waits for (expiry, question, choices). */
  waiting?: StepWaiting;
  /** awaiting_approval: exactly what an approval would let run, computed (see approval-view.ts). */
  approval?: ApprovalView;
  startedAt: string | null;
  finishedAt: string | null;
  /** The worker process that runs or ran the step's latest attempt (host · pid), when known. */
  worker: string | null;
  /** A fan-out instance: its template step (the group it belongs to) and its element of the list. */
  group?: string;
  item?: unknown;
  /** A fan-out template that made its group: how many instances it has. */
  groupSize?: number;
}

export interface RunView {
  id: string;
  planId: string;
  planVersion: number;
  status: RunStatus;
  traceId: string;
  approvedBy: string;
  /** The approver's note on the plan, when they gave one (the executing agent is shown it too). */
  approvalNote?: string;
  maxParallel: number;
  /** `auto`: failed steps get a recovery proposal applied by policy (bounded); `ask`: a person decides. */
  recoveryPolicy?: "ask" | "auto";
  /** The directory every tool of the run acts in, and the registered workspace's name. */
  workspace: { id: string | null; name: string | null; path: string };
  /** The run this one re-runs from a chosen step, if any. */
  rerunOf?: string;
  /** A sub-plan's run: the run and `run_plan` step that started it. */
  parent?: { runId: string; stepId: string };
  createdAt: string;
  startedAt: string | null;
  finishedAt: string | null;
  /**
   * When retention (STEPWISE_RETENTION_DAYS) removed this run's events and step logs: its steps'
   * states and results stay, its timeline and event log are empty (a task's merge and verification
   * events are kept).
   */
  eventsRemovedAt?: string;
  /** Sequence number of the last event reflected in this snapshot; stream from here. */
  lastSeq: number;
  steps: RunStepView[];
}

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
      ...(step.templateId !== null && { group: step.templateId, item: step.item }),
      ...(step.groupSize !== null && { groupSize: step.groupSize }),
    })),
  };
}

/** How a worker process is named to people: the same words `step.running` events carry. */
export function workerName(worker: { hostname: string; pid: number }): string {
  return `${worker.hostname} · pid ${worker.pid}`;
}

export async function listRuns(prisma: PrismaClient, planId: string) {
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
