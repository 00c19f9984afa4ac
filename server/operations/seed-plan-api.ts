import { z } from "zod";
import { logger } from "../logger";
import { CONFIGURATION_HELP } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { getPlanningSession, startPlanning } from "../planner/sessions";
import { writePlanArtifacts } from "../plans/artifacts";
import type { Plan, Step } from "../plans/schema";
import { getPlan, stepMetadata } from "../plans/service";
import { workspaceForNewWork } from "../plans/workspaces";
import { AppError } from "../errors";
import { invokeOperation, defineOperation, type OperationContext } from "./operation";
import { PERSON_OR_AGENT } from "./policy";
import { planCreate } from "./plans";
import type { AnyOperation } from "./registry";

/**
 * Seed 001's orchestrator API as operations: `POST /api/plan` (a ready plan is validated and
 * stored; a bare goal is planned by the configured LLM) and the plan shape its answers use. The
 * HTTP handlers (server/http/plan-api.ts) parse, call these, and shape the response.
 */

/** Seed 001's step metadata (`stepMetadata`), with the fields a client needs to run it beside it. */
export function seedStep(step: Step) {
  return {
    ...stepMetadata(step),
    description: step.description,
    args: step.args,
    dependsOn: step.dependsOn,
    risk: step.risk,
  };
}

export function seedPlan(plan: Plan) {
  return {
    id: plan.id,
    version: plan.version,
    goal: plan.goal,
    ...(plan.summary !== undefined && { summary: plan.summary }),
    steps: plan.steps.map(seedStep),
    successCriteria: plan.successCriteria,
    source: plan.source,
    author: plan.author,
    createdAt: plan.createdAt,
  };
}

export const createPlanInput = z.object({
  goal: z.string().trim().min(1, "A plan needs a goal").max(10_000),
  /** Absolute path of a directory the plan works in; the server's default workspace otherwise. */
  workspace: z.string().max(4_096).optional(),
  /** The planner's mode when Stepwise plans the goal itself. */
  mode: z.enum(["quick", "deep"]).default("quick"),
  /** A ready plan, for agents that plan themselves; without it the configured LLM plans. */
  steps: z.array(z.looseObject({})).max(20_000).optional(),
  summary: z.string().max(10_000).optional(),
  successCriteria: z.array(z.string()).optional(),
});

export const planSubmit = defineOperation({
  name: "plan.submit",
  // Agents plan with it too (seed 001): a plan is a proposal; running it needs a person's approval.
  callers: PERSON_OR_AGENT,
  summary:
    "Seed 001's plan request: a ready plan (goal and steps) is validated and stored, a bare goal is planned by the configured LLM; the plan is written to the workspace's .plans/",
  input: createPlanInput,
  output: z.object({
    plan: z.looseObject({ id: z.string(), version: z.number(), goal: z.string(), steps: z.array(z.unknown()) }),
    traceId: z.string(),
  }),
  async run(context, input) {
    const { app, identity } = context;
    // Registering a directory is a person's decision; an agent names one a person registered.
    const workspace = await workspaceForNewWork(app.db.pool, {
      ...(input.workspace !== undefined && { named: input.workspace }),
      defaultRoot: app.workspaceRoot,
      mayRegister: identity.kind === "person",
    });
    const plan = input.steps
      ? await storeReadyPlan(context, input, workspace.id)
      : await planWithLlm(context, input, workspace.id);
    const artifacts = await writePlanArtifacts(workspace.path, plan);
    logger.info(
      { traceId: plan.traceId, planId: plan.id, steps: plan.steps.length, artifacts },
      "plan created via the HTTP API",
    );
    return { plan: seedPlan(plan), traceId: plan.traceId };
  },
});

async function storeReadyPlan(
  context: OperationContext,
  input: z.output<typeof createPlanInput>,
  workspaceId: string,
): Promise<Plan> {
  const { app } = context;
  const created = await invokeOperation(planCreate, context, {
    draft: {
      goal: input.goal,
      steps: input.steps,
      ...(input.summary && { summary: input.summary }),
      ...(input.successCriteria && { successCriteria: input.successCriteria }),
    },
  });
  await app.db.prisma.task.update({
    where: { id: String(created.taskId) },
    data: { workspaceId },
  });
  return getPlan(app.db.prisma, created.id);
}

async function planWithLlm(
  { app, identity }: OperationContext,
  input: z.output<typeof createPlanInput>,
  workspaceId: string,
): Promise<Plan> {
  const planner = plannerFor(app);
  if (planner.config.providers.length === 0) {
    throw new AppError(
      "unavailable",
      `No LLM provider is configured, so Stepwise cannot plan a bare goal. Set ${CONFIGURATION_HELP.map((item) => item.variable).join(", or ")} and restart — or send a ready plan as {"goal", "steps"}.`,
      { help: CONFIGURATION_HELP },
    );
  }
  const { sessionId } = await startPlanning(planner, {
    goal: input.goal,
    mode: input.mode,
    workspaceId,
    actor: identity.name,
  });
  const deadline = Date.now() + planner.config.callTimeoutMs * (planner.config.maxRefinements + 3) + 5_000;
  for (;;) {
    const session = await getPlanningSession(planner, sessionId);
    if (session.status === "completed" && session.planId) return getPlan(app.db.prisma, session.planId);
    if (session.status === "invalid" && session.failure) {
      throw new AppError("invalid_plan", "The planner's plan failed the quality gates", session.failure);
    }
    if (session.status === "failed") {
      throw new AppError("provider_error", session.failure?.message ?? "The planner failed", session.failure);
    }
    if (session.status === "awaiting_answer") {
      throw new AppError(
        "invalid_state",
        `The planner has a question; answer it at /tasks/${sessionId} (deep mode asks; use quick mode for a direct answer)`,
        { sessionId },
      );
    }
    if (session.status === "cancelled" || Date.now() > deadline) {
      throw new AppError("provider_error", `Planning did not finish; follow it at /tasks/${sessionId}`, { sessionId });
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

export const seedPlanApiOperations = [planSubmit] as AnyOperation[];
