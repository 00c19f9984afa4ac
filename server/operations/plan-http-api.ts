import { z } from "zod";
import type { AppContext } from "../services";
import { toStoredEvent, type EventRow } from "../events/store";
import type { StoredEvent } from "../events/types";
import { logger } from "../logger";
import { CONFIGURATION_HELP } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { getPlanningSession } from "../planner/sessions";
import { writePlanArtifacts } from "../plans/artifacts";
import { riskSchema, type Plan, type Step } from "../plan-schema";
import { PLAN_SOURCES } from "../vocabulary";
import { getPlan, stepMetadata } from "../plans/service";
import { workspaceForNewWork } from "../plans/workspaces";
import { AppError } from "../errors";
import { authorize, invokeOperation, defineOperation, type OperationContext } from "./operation";
import { plannerStart } from "./planner";
import { PERSON_OR_AGENT } from "./policy";
import { planCreate } from "./plans";
import type { AnyOperation } from "./operation";

/**
 * The plan HTTP API (seed 001's orchestrator API) as operations: `POST /api/plan` (a ready plan is validated and
 * stored; a bare goal is planned by the configured LLM) and the plan shape its answers use. The
 * HTTP handlers (server/http/plan-api.ts) parse, call these, and shape the response.
 */

/** Seed 001's step metadata (`stepMetadata`), with the fields a client needs to run it beside it. */
export const apiStepSchema = z.object({
  id: z.string(),
  action: z.string(),
  tool: z.string(),
  capability: z.string(),
  capabilityLabel: z.string(),
  labels: z.array(z.string()),
  timeoutSeconds: z.number(),
  approvalRequired: z.boolean(),
  description: z.string(),
  args: z.record(z.string(), z.unknown()),
  dependsOn: z.array(z.string()),
  risk: riskSchema,
});

/** A plan as the plan HTTP API answers it. */
export const apiPlanSchema = z.object({
  id: z.string(),
  version: z.number(),
  goal: z.string(),
  summary: z.string().optional(),
  steps: z.array(apiStepSchema),
  successCriteria: z.array(z.string()),
  source: z.enum(PLAN_SOURCES),
  author: z.string(),
  createdAt: z.string(),
});

export function apiStep(step: Step): z.output<typeof apiStepSchema> {
  return {
    ...stepMetadata(step),
    description: step.description,
    args: step.args,
    dependsOn: step.dependsOn,
    risk: step.risk,
  };
}

export function apiPlan(plan: Plan): z.output<typeof apiPlanSchema> {
  return {
    id: plan.id,
    version: plan.version,
    goal: plan.goal,
    ...(plan.summary !== undefined && { summary: plan.summary }),
    steps: plan.steps.map(apiStep),
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
  role: "reviewer",
  summary:
    "A plan request: a ready plan (goal and steps) is validated and stored, a bare goal is planned by the configured LLM; the plan is written to the workspace's .plans/",
  input: createPlanInput,
  output: z.object({
    plan: apiPlanSchema,
    traceId: z.string(),
  }),
  async run(context, input) {
    const { app, identity } = context;
    // A bare goal is planned by the built-in planner: the same authority as planner.start (a
    // person, reviewer or above), asked before anything is looked up or registered.
    if (!input.steps) authorize(plannerStart, identity, { authority: app.engine.authority });
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
    return { plan: apiPlan(plan), traceId: plan.traceId };
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
  context: OperationContext,
  input: z.output<typeof createPlanInput>,
  workspaceId: string,
): Promise<Plan> {
  const { app } = context;
  const planner = plannerFor(app);
  if (planner.config.providers.length === 0) {
    throw new AppError(
      "unavailable",
      `No LLM provider is configured, so Stepwise cannot plan a bare goal. Set ${CONFIGURATION_HELP.map((item) => item.variable).join(", or ")} and restart — or send a ready plan as {"goal", "steps"}.`,
      { help: CONFIGURATION_HELP },
    );
  }
  const { sessionId } = await invokeOperation(plannerStart, context, {
    goal: input.goal,
    mode: input.mode,
    workspaceId,
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
      // A session no running worker can take says why it did not finish.
      const why = session.unserved ? ` (${session.unserved})` : "";
      throw new AppError("provider_error", `Planning did not finish${why}; follow it at /tasks/${sessionId}`, {
        sessionId,
      });
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Seed 001's payload: step transitions as `plan.step` with the step's metadata and state. */
function payload(event: StoredEvent, steps: Map<string, Step>) {
  const position = { stream: event.streamId, seq: event.seq, at: event.createdAt };
  const shaped = shape(event, steps);
  return { name: shaped.name, data: { ...shaped.data, ...position } };
}

function shape(event: StoredEvent, steps: Map<string, Step>) {
  const status = "status" in event.data && typeof event.data.status === "string" ? event.data.status : undefined;
  const step = event.stepId ? steps.get(event.stepId) : undefined;
  if (event.type === "plan.step") {
    return {
      name: "plan.step",
      data: { event: "plan.step", traceId: event.traceId, planId: event.planId, ...event.data },
    };
  }
  if (event.type.startsWith("step.") && status && step) {
    return {
      name: "plan.step",
      data: {
        event: "plan.step",
        traceId: event.traceId,
        planId: event.planId,
        runId: event.runId,
        // The key a step presents on every attempt, replays after a crash included (seed 001's
        // durable resume): tools use it to de-duplicate side effects downstream.
        // Observers get the metadata, not the arguments (which may hold content), as in the
        // plan's own queued plan.step events.
        step: { ...stepMetadata(step), state: status, idempotencyKey: `${event.runId}:${step.id}` },
        ...("result" in event.data && event.data.result !== undefined && { result: event.data.result }),
      },
    };
  }
  return {
    name: event.type,
    data: {
      event: event.type,
      traceId: event.traceId,
      planId: event.planId,
      ...(event.runId && { runId: event.runId }),
      ...(event.stepId && { stepId: event.stepId }),
      data: event.data,
    },
  };
}

/**
 * Where a reader of a plan's events stands: the last sequence number seen in each stream (the
 * plan's own and each run's).
 */
export type PlanEventCursor = Record<string, number>;

/** One of a plan's events in seed 001's shape, with the stream position it was read at. */
export const seedPlanEventSchema = z.object({
  streamId: z.string(),
  seq: z.number(),
  name: z.string(),
  data: z.record(z.string(), z.unknown()),
});
export type SeedPlanEvent = z.output<typeof seedPlanEventSchema>;

/** At most this many events per read; a reader asks again from where the batch ended. */
const EVENT_BATCH = 1000;

/**
 * One batch of a plan's events (its own stream and its runs') after `cursor`, in time order,
 * shaped as seed 001's payloads. The live stream of `GET /api/plan/:id/events` reads with this
 * after `plan.events` has checked its caller; `plan.events` itself reads every batch.
 */
export async function readSeedPlanEvents(
  app: AppContext,
  planId: string,
  cursor: PlanEventCursor,
  steps: Map<string, Step>,
): Promise<SeedPlanEvent[]> {
  const rows = await app.db.pool.query<EventRow>(
    `select * from events where plan_id = $1 and seq > coalesce(($2::jsonb ->> stream_id)::int, 0)
     order by created_at, stream_id, seq limit ${EVENT_BATCH}`,
    [planId, JSON.stringify(cursor)],
  );
  return rows.rows.map(toStoredEvent).map((event) => ({
    streamId: event.streamId,
    seq: event.seq,
    ...payload(event, steps),
  }));
}

export const planEventBatch = EVENT_BATCH;

/** The streams a plan's events arrive on besides its own: its runs'. */
export async function planRunStreams(app: AppContext, planId: string): Promise<string[]> {
  const runs = await app.db.pool.query<{ id: string }>("select id from runs where plan_id = $1", [planId]);
  return runs.rows.map((run) => run.id);
}

/** The steps of a plan's current version by id: what a step transition's payload describes. */
export async function planStepsById(app: AppContext, planId: string): Promise<Map<string, Step>> {
  const plan = await getPlan(app.db.prisma, planId);
  return new Map(plan.steps.map((step) => [step.id, step]));
}

export const planEvents = defineOperation({
  name: "plan.events",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A plan's events and its runs' after a cursor (the last sequence number read per stream), oldest first",
  input: z.object({
    planId: z.string().min(1).max(100),
    after: z
      .record(z.string(), z.number().int().min(0))
      .optional()
      .describe("The last sequence number read per stream; from the start otherwise"),
  }),
  output: z.object({
    events: z.array(seedPlanEventSchema),
  }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const steps = await planStepsById(app, input.planId);
    const cursor = { ...input.after };
    const events: SeedPlanEvent[] = [];
    for (
      let batch = await readSeedPlanEvents(app, input.planId, cursor, steps);
      batch.length > 0;
      batch = await readSeedPlanEvents(app, input.planId, cursor, steps)
    ) {
      for (const event of batch) {
        cursor[event.streamId] = event.seq;
        events.push(event);
      }
    }
    return { events };
  },
});

export const planHttpApiOperations = [planSubmit, planEvents] as AnyOperation[];
