import { randomBytes, randomUUID } from "node:crypto";
import { recordAudit } from "../audit/audit-log";
import { PRISMA_TRANSACTION_OPTIONS, prismaQueryable } from "../db";
import type { PrismaClient } from "../generated/prisma/client";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import { inSpan } from "../telemetry";
import type { ToolRegistry } from "../tools/registry";
import { z } from "zod";
import type { Plan, PlanAdvice, PlanContent, PlanSource, Step } from "../plan-schema";
import { PLAN_LIFECYCLE_STATES } from "../vocabulary";
import { checkPlanQuality, type QualityIssue } from "./quality-gates";
import { checkPlanDraft } from "./validate";

export function newPlanId(): string {
  return `plan-${randomBytes(4).toString("hex")}`;
}

export interface CreatePlanInput {
  draft: unknown;
  source: PlanSource;
  author: string;
  /** The named credential that proved an agent author (an approved plan of agent tasks is its to work). */
  authorCredential?: string | null;
  workspaceId?: string;
  model?: string;
  usage?: { inputTokens: number; outputTokens: number };
  /** The trace the plan was made in (the planner's session), so its calls and the plan share one id. */
  traceId?: string;
  /** Where file names are checked when the plan has no registered workspace (the default one). */
  workspaceRoot?: string;
  /** A seed 000 checklist: titles only (see `checkPlanQuality`). */
  checklist?: boolean;
  /** What the quality gates find is stored as advice for the reviewer instead of refusing (plan mode). */
  qualityAdvisory?: boolean;
}

/**
 * The one check every plan and every new version passes before it is stored: structure
 * (`checkPlanDraft`), then the quality gates (`checkPlanQuality`). Refused with every issue — except
 * that an author who plans by seed 002's format (an agent in plan mode, whose plan need not name
 * files or hints) has the quality gates' findings returned as advice that the reviewer sees.
 */
export async function checkPlanToStore(
  prisma: PrismaClient,
  tools: ToolRegistry,
  draft: unknown,
  where: { workspaceId?: string | null; workspaceRoot?: string; checklist?: boolean; qualityAdvisory?: boolean },
): Promise<{ content: PlanContent; advice: QualityIssue[] }> {
  const checked = checkPlanDraft(draft, tools);
  if (!checked.ok) throw new AppError("invalid_plan", "The plan has problems", checked.issues);
  const workspace = where.workspaceId
    ? await prisma.workspace.findUnique({ where: { id: where.workspaceId }, select: { path: true } })
    : null;
  const workspaceRoot = workspace?.path ?? where.workspaceRoot;
  const issues = await checkPlanQuality(checked.plan, {
    tools,
    ...(workspaceRoot !== undefined && { workspaceRoot }),
    ...(where.checklist && { checklist: true }),
  });
  if (issues.length > 0 && !where.qualityAdvisory) throw new AppError("invalid_plan", "The plan has problems", issues);
  return { content: checked.plan, advice: issues };
}

export function highestStepNumber(content: PlanContent): number {
  return Math.max(0, ...content.steps.map((step) => Number(/^step_(\d+)$/.exec(step.id)?.[1] ?? 0)));
}

/**
 * Validates a draft and stores it as version 1 of a new plan in a new task. Invalid drafts are
 * refused with every issue and store nothing.
 */
export function createPlan(prisma: PrismaClient, tools: ToolRegistry, input: CreatePlanInput): Promise<Plan> {
  return inSpan("plan.create", { "stepwise.plan_source": input.source }, async (span) => {
    const plan = await storeNewPlan(prisma, tools, input);
    span.setAttributes({
      "stepwise.plan_id": plan.id,
      "stepwise.trace_id": plan.traceId,
      "stepwise.steps": plan.steps.length,
    });
    return plan;
  });
}

async function storeNewPlan(prisma: PrismaClient, tools: ToolRegistry, input: CreatePlanInput): Promise<Plan> {
  const { content, advice } = await checkPlanToStore(prisma, tools, input.draft, input);
  const id = newPlanId();
  const traceId = input.traceId ?? randomUUID();
  await prisma.$transaction(async (db) => {
    const task = await db.task.create({ data: { goal: content.goal, workspaceId: input.workspaceId ?? null } });
    await db.plan.create({
      data: { id, taskId: task.id, currentVersion: 1, lastStepNumber: highestStepNumber(content) },
    });
    await db.planVersion.create({
      data: planVersionRow(id, 1, content, { ...input, traceId, changeNote: "Created", advice }),
    });
    await recordAudit(prismaQueryable(db), { actor: input.author, action: "plan.created", planId: id, planVersion: 1 });
    // Seed 001: a new plan announces each of its steps as queued on the plan's event stream.
    await appendEvents(prismaQueryable(db), { streamId: id, planId: id, runId: null, traceId }, [
      { type: "plan.created", data: { version: 1, goal: content.goal, source: input.source } },
      ...content.steps.map((step) => ({
        type: "plan.step" as const,
        stepId: step.id,
        data: { step: { ...stepMetadata(step), state: "queued" } },
      })),
    ]);
  }, PRISMA_TRANSACTION_OPTIONS);
  return getPlan(prisma, id);
}

/** The stored row of one plan version: its content and where it came from. */
export function planVersionRow(
  planId: string,
  version: number,
  content: PlanContent,
  meta: {
    source: PlanSource;
    author: string;
    authorCredential?: string | null;
    traceId: string;
    changeNote: string;
    model?: string;
    usage?: { inputTokens: number; outputTokens: number };
    advice?: QualityIssue[];
  },
) {
  return {
    planId,
    version,
    goal: content.goal,
    summary: content.summary ?? null,
    steps: content.steps as object[],
    successCriteria: content.successCriteria,
    questions: content.questions,
    contextNotes: content.contextNotes ?? null,
    estimatedDuration: content.estimatedDuration ?? null,
    source: meta.source,
    model: meta.model ?? null,
    usage: meta.usage ?? undefined,
    traceId: meta.traceId,
    author: meta.author,
    authorCredential: meta.authorCredential ?? null,
    changeNote: meta.changeNote,
    advice: (meta.advice ?? []) as object[],
  };
}

/** The step fields seed 001 publishes to observers (no arguments: they may hold content). */
export function stepMetadata(step: Step) {
  return {
    id: step.id,
    action: step.title ?? step.description,
    tool: step.tool,
    capability: step.capability,
    capabilityLabel: step.capabilityLabel,
    labels: step.labels,
    timeoutSeconds: step.timeoutSeconds,
    approvalRequired: step.approvalRequired,
  };
}

type PlanVersionRow = Awaited<ReturnType<PrismaClient["planVersion"]["findFirstOrThrow"]>>;

function toPlan(taskId: string, row: PlanVersionRow): Plan {
  return {
    id: row.planId,
    taskId,
    version: row.version,
    goal: row.goal,
    ...(row.summary !== null && { summary: row.summary }),
    steps: row.steps as unknown as Step[],
    successCriteria: row.successCriteria as string[],
    questions: row.questions as string[],
    ...(row.contextNotes !== null && { contextNotes: row.contextNotes }),
    ...(row.estimatedDuration !== null && { estimatedDuration: row.estimatedDuration }),
    source: row.source as PlanSource,
    ...(row.model !== null && { model: row.model }),
    ...(row.usage !== null && { usage: row.usage as Plan["usage"] }),
    traceId: row.traceId,
    author: row.author,
    createdAt: row.createdAt.toISOString(),
    ...(Array.isArray(row.advice) && row.advice.length > 0 && { advice: row.advice as unknown as PlanAdvice[] }),
  };
}

/** A plan at `version`, or at its current version. */
export async function getPlan(prisma: PrismaClient, planId: string, version?: number): Promise<Plan> {
  const plan = await prisma.plan.findUnique({ where: { id: planId } });
  if (!plan) throw new AppError("not_found", `No plan ${planId}`);
  const row = await prisma.planVersion.findUnique({
    where: { planId_version: { planId, version: version ?? plan.currentVersion } },
  });
  if (!row) throw new AppError("not_found", `Plan ${planId} has no version ${version}`);
  return toPlan(plan.taskId, row);
}

export const planSummarySchema = z.object({
  id: z.string(),
  goal: z.string(),
  version: z.number(),
  steps: z.number(),
  source: z.string(),
  updatedAt: z.string(),
  lastRun: z.object({ id: z.string(), status: z.string() }).nullable(),
  /** active, or set aside by a person: rejected (seed 002) or archived. */
  state: z.enum(PLAN_LIFECYCLE_STATES),
});
export type PlanSummary = z.output<typeof planSummarySchema>;

/** `active` (the default list) or `archived`: the plans a person archived or rejected. */
export type PlanListShow = "active" | "archived";

export async function listPlans(
  prisma: PrismaClient,
  options: { limit?: number; show?: PlanListShow } = {},
): Promise<PlanSummary[]> {
  const setAside = { OR: [{ archivedAt: { not: null } }, { rejectedAt: { not: null } }] };
  const plans = await prisma.plan.findMany({
    where: options.show === "archived" ? setAside : { archivedAt: null, rejectedAt: null },
    orderBy: { updatedAt: "desc" },
    take: options.limit ?? 100,
    include: { runs: { orderBy: { createdAt: "desc" }, take: 1, select: { id: true, status: true } } },
  });
  const versions = await prisma.planVersion.findMany({
    where: { OR: plans.map((plan) => ({ planId: plan.id, version: plan.currentVersion })) },
    select: { planId: true, goal: true, steps: true, source: true },
  });
  const byPlan = new Map(versions.map((version) => [version.planId, version]));
  return plans.map((plan) => {
    const version = byPlan.get(plan.id);
    return {
      id: plan.id,
      goal: version?.goal ?? "",
      version: plan.currentVersion,
      steps: Array.isArray(version?.steps) ? version.steps.length : 0,
      source: version?.source ?? "manual",
      updatedAt: plan.updatedAt.toISOString(),
      lastRun: plan.runs[0] ?? null,
      state: plan.rejectedAt ? "rejected" : plan.archivedAt ? "archived" : "active",
    };
  });
}
