import { generateText, Output, type ModelMessage } from "ai";
import { recordAudit } from "../audit/audit-log";
import { prismaQueryable } from "../db";
import { applyRecoveryAction } from "../engine/recovery";
import { recoveryActionSchema, type RecoveryAction } from "../engine/recovery-action";
import { getRun } from "../engine/run-view";
import { AppError } from "../errors";
import { getPlan } from "../plans/service";
import { checkPlanDraft } from "../plans/validate";
import type { PlannerDeps } from "./deps";
import { recoveryProposalSchema, type LlmRecoveryProposal } from "./llm-schemas";
import { callModel } from "./model-call";
import { PROVIDER_OPTIONS } from "./planning";
import { recoveryPrompt, refinePrompt } from "./prompts";
import { requirePlanningModel } from "./config";
import { toolsForWorkspace } from "../tools/types";

export type ProposalStatus = "proposed" | "accepted" | "rejected" | "failed";

export interface RecoveryProposalView {
  id: string;
  runId: string;
  stepId: string;
  attempt: number;
  status: ProposalStatus;
  action: RecoveryAction;
  reasoning: string;
  model: string;
  /** Asked and decided by the run's `auto` recovery policy, not a person. */
  automatic: boolean;
  decidedBy: string | null;
  decidedAt: string | null;
  error: string | null;
  createdAt: string;
}

type ProposalRow = Awaited<ReturnType<PlannerDeps["prisma"]["recoveryProposal"]["findFirstOrThrow"]>>;

function toView(row: ProposalRow): RecoveryProposalView {
  return {
    id: row.id,
    runId: row.runId,
    stepId: row.stepId,
    attempt: row.attempt,
    status: row.status as ProposalStatus,
    action: row.action as RecoveryAction,
    reasoning: row.reasoning,
    model: row.model,
    automatic: row.automatic,
    decidedBy: row.decidedBy,
    decidedAt: row.decidedAt?.toISOString() ?? null,
    error: row.error,
    createdAt: row.createdAt.toISOString(),
  };
}

/** Problems of a proposed action that the engine would refuse, in words the model can act on. */
function actionProblems(
  deps: PlannerDeps,
  plan: Awaited<ReturnType<typeof getPlan>>,
  stepId: string,
  proposal: LlmRecoveryProposal,
): { action?: RecoveryAction; problems: string[] } {
  const { kind } = proposal.action;
  let candidate: unknown;
  if (kind === "retry") candidate = { kind, ...(proposal.action.args && { args: proposal.action.args }) };
  else if (kind === "insert_steps") candidate = { kind, steps: proposal.action.steps ?? [] };
  else candidate = { kind };
  const parsed = recoveryActionSchema.safeParse(candidate);
  if (!parsed.success)
    return { problems: parsed.error.issues.map((issue) => `${issue.path.join(".")}: ${issue.message}`) };
  const action = parsed.data;
  if (action.kind === "retry" && action.args) {
    const steps = plan.steps.map((step) => (step.id === stepId ? { ...step, args: action.args! } : step));
    const issues = checkPlanDraft({ goal: plan.goal, steps }, deps.tools).issues.filter(
      (issue) => issue.stepId === stepId,
    );
    return { action, problems: issues.map((issue) => issue.message) };
  }
  if (action.kind === "insert_steps") {
    const existing = new Set(plan.steps.map((step) => step.id));
    const clash = action.steps.filter((step) => existing.has(step.id)).map((step) => step.id);
    if (clash.length) return { action, problems: [`New steps need new ids; ${clash.join(", ")} already exist`] };
    const steps = [...plan.steps, ...action.steps];
    const newIds = new Set(action.steps.map((step) => step.id));
    const issues = checkPlanDraft({ goal: plan.goal, steps }, deps.tools).issues.filter(
      (issue) => issue.stepId && newIds.has(issue.stepId),
    );
    return { action, problems: issues.map((issue) => issue.message) };
  }
  return { action, problems: [] };
}

/**
 * "Ask the planner" on a failed step (seed 004 strategy 3): one proposal — retry with new
 * arguments, skip, insert steps or abort — with its reasoning, stored for the person to accept
 * or reject. An action the engine would refuse goes back to the model once with the problems.
 */
export async function proposeRecovery(
  deps: PlannerDeps,
  input: { runId: string; stepId: string; model?: string; actor: string; automatic?: boolean },
): Promise<RecoveryProposalView> {
  const modelId = requirePlanningModel(deps.config, input.model);
  const run = await getRun(deps.prisma, input.runId);
  const runStep = run.steps.find((step) => step.stepId === input.stepId);
  if (!runStep) throw new AppError("not_found", `Run has no step ${input.stepId}`);
  if (runStep.status !== "failed") {
    throw new AppError("invalid_state", `Only a failed step can be recovered; ${input.stepId} is ${runStep.status}`);
  }
  const plan = await getPlan(deps.prisma, run.planId, run.planVersion);
  const step = plan.steps.find((candidate) => candidate.id === input.stepId);
  if (!step) throw new AppError("not_found", `Plan version ${run.planVersion} has no step ${input.stepId}`);
  const byId = new Map(run.steps.map((candidate) => [candidate.stepId, candidate]));
  const prompt = recoveryPrompt({
    goal: plan.goal,
    step,
    error: runStep.error ?? runStep.result?.error ?? runStep.reason ?? "unknown error",
    attempt: runStep.attempt,
    dependencyResults: step.dependsOn.map((id) => ({
      stepId: id,
      value: JSON.stringify(byId.get(id)?.result?.value ?? null).slice(0, 2_000),
    })),
    otherSteps: plan.steps
      .filter((candidate) => candidate.id !== step.id)
      .map((candidate) => ({
        id: candidate.id,
        status: byId.get(candidate.id)?.status ?? "pending",
        description: candidate.title ?? candidate.description,
      })),
    tools: toolsForWorkspace(deps.tools.list(), run.workspace.path),
  });
  const messages: ModelMessage[] = [{ role: "user", content: prompt }];
  const scope = { traceId: run.traceId, runId: run.id, planId: run.planId };
  for (let attempt = 0; ; attempt++) {
    const result = await callModel(deps, { scope, purpose: "recovery", modelId }, (model, abortSignal) =>
      generateText({
        model,
        messages,
        output: Output.object({ schema: recoveryProposalSchema, name: "recovery" }),
        abortSignal,
        maxRetries: deps.config.maxRetries,
        providerOptions: PROVIDER_OPTIONS,
      }),
    );
    const { action, problems } = actionProblems(deps, plan, input.stepId, result.output);
    if (action && problems.length === 0) {
      const row = await deps.prisma.recoveryProposal.create({
        data: {
          runId: run.id,
          stepId: input.stepId,
          attempt: runStep.attempt,
          status: "proposed",
          action: action as object,
          reasoning: result.output.reasoning,
          model: modelId,
          automatic: input.automatic === true,
        },
      });
      await recordAudit(prismaQueryable(deps.prisma), {
        actor: input.actor,
        action: "recovery.proposed",
        planId: run.planId,
        planVersion: run.planVersion,
        runId: run.id,
        stepId: input.stepId,
        detail: { proposalId: row.id, kind: action.kind, model: modelId },
      });
      return toView(row);
    }
    if (attempt >= 1) {
      throw new AppError(
        "provider_error",
        `The planner proposed an action the engine would refuse: ${problems.join("; ")}. Ask again, or recover by hand.`,
        { kind: "invalid_proposal", retryable: true },
      );
    }
    messages.push(
      { role: "assistant", content: result.text || JSON.stringify(result.output) },
      { role: "user", content: refinePrompt({ details: problems }) },
    );
  }
}

export async function listRecoveryProposals(
  deps: PlannerDeps,
  input: { runId: string; stepId?: string },
): Promise<RecoveryProposalView[]> {
  const rows = await deps.prisma.recoveryProposal.findMany({
    where: { runId: input.runId, ...(input.stepId && { stepId: input.stepId }) },
    orderBy: { createdAt: "desc" },
    take: 50,
  });
  return rows.map(toView);
}

/**
 * The person's decision. Accepting applies the action through the engine (which records it in the
 * run's audit and events); both decisions are recorded on the proposal and in the audit log.
 */
export async function decideRecovery(
  deps: PlannerDeps,
  input: { proposalId: string; accept: boolean; actor: string },
): Promise<RecoveryProposalView> {
  const proposal = await deps.prisma.recoveryProposal.findUnique({ where: { id: input.proposalId } });
  if (!proposal) throw new AppError("not_found", `No recovery proposal ${input.proposalId}`);
  const claimed = await deps.prisma.recoveryProposal.updateMany({
    where: { id: proposal.id, status: "proposed" },
    data: { status: input.accept ? "accepted" : "rejected", decidedBy: input.actor, decidedAt: new Date() },
  });
  if (claimed.count === 0) throw new AppError("invalid_state", `This proposal was already ${proposal.status}`);
  const run = await deps.prisma.run.findUniqueOrThrow({ where: { id: proposal.runId } });
  if (input.accept) {
    try {
      await applyRecoveryAction(deps.engine, deps.prisma, {
        runId: proposal.runId,
        stepId: proposal.stepId,
        action: proposal.action as RecoveryAction,
        actor: input.actor,
      });
    } catch (error) {
      await deps.prisma.recoveryProposal.update({
        where: { id: proposal.id },
        data: { status: "failed", error: error instanceof Error ? error.message : String(error) },
      });
      throw error;
    }
  }
  await recordAudit(prismaQueryable(deps.prisma), {
    actor: input.actor,
    action: input.accept ? "recovery.accepted" : "recovery.rejected",
    planId: run.planId,
    planVersion: run.planVersion,
    runId: run.id,
    stepId: proposal.stepId,
    detail: { proposalId: proposal.id, kind: (proposal.action as RecoveryAction).kind },
  });
  return toView(await deps.prisma.recoveryProposal.findUniqueOrThrow({ where: { id: proposal.id } }));
}
