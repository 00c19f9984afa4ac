import { z } from "zod";
import type { AppContext } from "../app-context";
import { AppError } from "../errors";
import { toStoredEvent, type EventRow } from "../events/store";
import type { StoredEvent } from "../events/types";
import type { Span } from "@opentelemetry/api";
import { logger } from "../logger";
import type { Identity } from "../operations/identity";
import { invokeOperation } from "../operations/operation";
import { planApprove, planCreate } from "../operations/plans";
import { runDecide } from "../operations/runs";
import { CONFIGURATION_HELP } from "../planner/config";
import { plannerFor } from "../planner/deps";
import { getPlanningSession, startPlanning } from "../planner/sessions";
import { writePlanArtifacts } from "../plans/artifacts";
import { exportPlanMarkdown } from "../plans/export";
import type { Plan, Step } from "../plans/schema";
import { getPlan, stepMetadata } from "../plans/service";
import { listPlanVersions } from "../plans/versions";
import { getRun, listRuns } from "../engine/run-view";
import { inSpan } from "../telemetry";
import { workspaceForNewWork } from "../plans/workspaces";
import { withCaller } from "../caller-context";
import { refuseUnsafeInput } from "./input-guard";
import { problemResponse } from "./problem";
import { identityOf } from "./request-identity";

/**
 * Seed 001's orchestrator API as plain JSON over HTTP: `POST /api/plan`, `GET /api/plan/:id`,
 * `GET /api/plan/:id/events` (SSE, or JSON), `POST /api/plan/:id/approve` and
 * `POST /api/runs/:id/decide`. Handlers parse, call the operations layer or the planner, and
 * shape seed 001's answers; every error is problem+json. Identity comes from the door.
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

async function readJson(request: Request): Promise<unknown> {
  const refused = await refuseUnsafeInput(request);
  if (refused) throw Object.assign(new AppError("invalid_input", "Unsafe input"), { response: refused });
  try {
    return JSON.parse(await request.text());
  } catch {
    throw new AppError("invalid_input", "The request body is not valid JSON");
  }
}

function parse<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
  const parsed = schema.safeParse(value);
  if (!parsed.success) {
    throw new AppError("invalid_input", z.prettifyError(parsed.error), {
      issues: parsed.error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })),
    });
  }
  return parsed.data;
}

/**
 * Path parameters and query numbers are screened before anything looks them up: a value the
 * database could not take (a run id that is no UUID, a version past its integer range) is the
 * caller's mistake, answered 400 naming the parameter — never a database error as a 500.
 */
function screenRunId(runId: string): void {
  if (!z.uuid().safeParse(runId).success) invalidParameter("runId", "runId must be a run's id (a UUID)");
}

function screenPlanId(planId: string): void {
  if (planId.length === 0 || planId.length > 100 || /[\p{Cc}]/u.test(planId)) {
    invalidParameter("planId", "planId must be a plan's id (1–100 characters, no control characters)");
  }
}

/** The largest value PostgreSQL's `integer` holds, which plan versions are. */
const MAX_VERSION = 2_147_483_647;

function versionParameter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const version = /^[1-9][0-9]{0,9}$/.test(value) ? Number(value) : Number.NaN;
  if (!(version <= MAX_VERSION)) invalidParameter("version", `version must be a whole number from 1 to ${MAX_VERSION}`);
  return version;
}

function invalidParameter(name: string, message: string): never {
  throw new AppError("invalid_input", message, { issues: [{ path: [name], message }] });
}

/** Every handler runs in a span named for its route; errors become problem+json inside it. */
function respond(route: string, work: (span: Span) => Promise<Response>): Promise<Response> {
  return inSpan(route, { "http.route": route }, async (span) => {
    let response: Response;
    try {
      response = await work(span);
    } catch (error) {
      const refused = (error as { response?: Response }).response;
      if (!refused && !(error instanceof AppError)) logger.error({ err: error, route }, "HTTP API request failed");
      response = refused ?? problemResponse(error);
    }
    span.setAttribute("http.response.status_code", response.status);
    return response;
  });
}

function traced(span: Span, plan: { id: string; traceId: string }): void {
  span.setAttributes({ "stepwise.plan_id": plan.id, "stepwise.trace_id": plan.traceId });
}

/** `POST /api/plan`: a ready plan is validated and stored; a bare goal is planned by the LLM. */
export function createPlanFromApi(request: Request, app: AppContext): Promise<Response> {
  return respond("POST /api/plan", async (span) => {
    const identity = identityOf(request);
    const input = parse(createPlanInput, await readJson(request));
    // What this request writes is stored as the caller's, by kind (server/caller-context.ts).
    return withCaller(identity, () => createPlanFor(app, identity, input, span));
  });
}

async function createPlanFor(
  app: AppContext,
  identity: Identity,
  input: z.output<typeof createPlanInput>,
  span: Span,
): Promise<Response> {
  // Registering a directory is a person's decision; an agent names one a person registered.
  const workspace = await workspaceForNewWork(app.db.pool, {
    ...(input.workspace !== undefined && { named: input.workspace }),
    defaultRoot: app.workspaceRoot,
    mayRegister: identity.kind === "person",
  });
  const plan = input.steps
    ? await storeReadyPlan(app, identity, input, workspace.id)
    : await planWithLlm(app, identity, input, workspace.id);
  traced(span, plan);
  const artifacts = await writePlanArtifacts(workspace.path, plan);
  logger.info(
    { traceId: plan.traceId, planId: plan.id, steps: plan.steps.length, artifacts },
    "plan created via the HTTP API",
  );
  return Response.json({ plan: seedPlan(plan), traceId: plan.traceId }, { status: 201 });
}

async function storeReadyPlan(
  app: AppContext,
  identity: Identity,
  input: z.output<typeof createPlanInput>,
  workspaceId: string,
): Promise<Plan> {
  const created = await invokeOperation(
    planCreate,
    { app, identity },
    {
      draft: {
        goal: input.goal,
        steps: input.steps,
        ...(input.summary && { summary: input.summary }),
        ...(input.successCriteria && { successCriteria: input.successCriteria }),
      },
    },
  );
  await app.db.prisma.task.update({
    where: { id: String(created.taskId) },
    data: { workspaceId },
  });
  return getPlan(app.db.prisma, created.id);
}

async function planWithLlm(
  app: AppContext,
  identity: Identity,
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

/** `GET /api/plan/:id`: JSON in seed 001's shape, or Markdown with `Accept: text/markdown`. */
export function getPlanFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id", async (span) => {
    identityOf(request);
    screenPlanId(planId);
    const version = versionParameter(new URL(request.url).searchParams.get("version"));
    const plan = await getPlan(app.db.prisma, planId, version);
    traced(span, plan);
    if ((request.headers.get("accept") ?? "").includes("text/markdown")) {
      return new Response(exportPlanMarkdown(plan).content, {
        headers: { "content-type": "text/markdown; charset=utf-8" },
      });
    }
    return Response.json({ plan: seedPlan(plan), traceId: plan.traceId });
  });
}

/** `GET /api/plan/:id/versions`: every version, newest first, with who made it and why. */
export function planVersionsFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id/versions", async () => {
    identityOf(request);
    screenPlanId(planId);
    return Response.json({ planId, versions: await listPlanVersions(app.db.prisma, planId) });
  });
}

/** `GET /api/plan/:id/runs`: the plan's runs, newest first. */
export function planRunsFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id/runs", async () => {
    identityOf(request);
    screenPlanId(planId);
    await getPlan(app.db.prisma, planId);
    return Response.json({ planId, runs: await listRuns(app.db.prisma, planId) });
  });
}

/**
 * `GET /api/runs/:id`: a run's state, each step with the idempotency key it presents on every
 * attempt — replays after a crash included — so side effects can be de-duplicated downstream.
 */
export function runFromApi(request: Request, app: AppContext, runId: string): Promise<Response> {
  return respond("GET /api/runs/:id", async (span) => {
    identityOf(request);
    screenRunId(runId);
    const run = await getRun(app.db.prisma, runId, app.tools);
    traced(span, { id: run.planId, traceId: run.traceId });
    return Response.json({
      ...run,
      steps: run.steps.map((step) => ({ ...step, idempotencyKey: `${run.id}:${step.stepId}` })),
    });
  });
}

/** `POST /api/plan/:id/approve {version?, maxParallel?}`: a person's approval starts the run. */
export function approvePlanFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("POST /api/plan/:id/approve", async (span) => {
    const identity = identityOf(request);
    screenPlanId(planId);
    const body = (await readJson(request)) as Record<string, unknown>;
    const version = body.version ?? (await app.db.prisma.plan.findUnique({ where: { id: planId } }))?.currentVersion;
    if (version === undefined) throw new AppError("not_found", `No plan ${planId}`);
    const started = await invokeOperation(planApprove, { app, identity }, { ...body, planId, version });
    traced(span, { id: planId, traceId: started.traceId });
    span.setAttribute("stepwise.run_id", started.runId);
    return Response.json(started, { status: 201 });
  });
}

/** `POST /api/runs/:id/decide {stepId, approve, comment?}`: a person approves or denies a gated step. */
export function decideFromApi(request: Request, app: AppContext, runId: string): Promise<Response> {
  return respond("POST /api/runs/:id/decide", async (span) => {
    span.setAttribute("stepwise.run_id", runId);
    const identity = identityOf(request);
    screenRunId(runId);
    const body = (await readJson(request)) as Record<string, unknown>;
    return Response.json(await invokeOperation(runDecide, { app, identity }, { ...body, runId }));
  });
}

/**
 * Where a reader of a plan's events stands: the last sequence number seen in each stream (the
 * plan's own and each run's). Sent as the SSE `id`, so `Last-Event-ID` resumes every stream at once.
 */
type Cursor = Record<string, number>;

function encodeCursor(cursor: Cursor): string {
  return Buffer.from(JSON.stringify(cursor)).toString("base64url");
}

function decodeCursor(value: string | null): Cursor {
  if (!value) return {};
  try {
    const parsed = JSON.parse(Buffer.from(value, "base64url").toString()) as unknown;
    if (
      parsed &&
      typeof parsed === "object" &&
      Object.values(parsed).every((seq) => Number.isSafeInteger(seq) && (seq as number) >= 0)
    ) {
      return parsed as Cursor;
    }
  } catch {
    // fall through
  }
  throw new AppError("invalid_input", "Last-Event-ID is not an id this server sent");
}

async function eventsAfter(app: AppContext, planId: string, cursor: Cursor): Promise<StoredEvent[]> {
  const rows = await app.db.pool.query<EventRow>(
    `select * from events where plan_id = $1 and seq > coalesce(($2::jsonb ->> stream_id)::int, 0)
     order by created_at, stream_id, seq limit 1000`,
    [planId, JSON.stringify(cursor)],
  );
  return rows.rows.map(toStoredEvent);
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

const HEARTBEAT_MS = 15_000;

/**
 * `GET /api/plan/:id/events`: with `Accept: text/event-stream`, replays the plan's events and its
 * runs' and then streams new ones, each with an `id:` that resumes with no gap or duplicate, and a
 * heartbeat comment every 15 s; with `Accept: application/json`, the events so far as one object.
 */
export function planEventsFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id/events", async (span) => {
    identityOf(request);
    screenPlanId(planId);
    const accept = request.headers.get("accept") ?? "";
    const plan = await getPlan(app.db.prisma, planId);
    traced(span, plan);
    const steps = new Map(plan.steps.map((step) => [step.id, step]));
    const start = decodeCursor(request.headers.get("last-event-id") ?? new URL(request.url).searchParams.get("after"));
    if (accept.includes("application/json") && !accept.includes("text/event-stream")) {
      const events: unknown[] = [];
      const cursor = { ...start };
      for (
        let batch = await eventsAfter(app, planId, cursor);
        batch.length > 0;
        batch = await eventsAfter(app, planId, cursor)
      ) {
        for (const event of batch) {
          cursor[event.streamId] = event.seq;
          const { name, data } = payload(event, steps);
          events.push({ id: encodeCursor(cursor), ...data, event: name });
        }
      }
      return Response.json({ planId, lastEventId: encodeCursor(cursor), events });
    }
    if (!accept.includes("text/event-stream")) {
      throw new AppError("invalid_input", "Ask for text/event-stream (live) or application/json (the events so far)");
    }
    return new Response(sseStream(app, planId, start, steps, request.signal), {
      headers: { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" },
    });
  });
}

/** Exported for its test: the live stream of a plan's events (seed 001's SSE). */
export function sseStream(
  app: AppContext,
  planId: string,
  start: Cursor,
  steps: Map<string, Step>,
  signal: AbortSignal,
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const cursor = { ...start };
  let wake: (() => void) | undefined;
  const unsubscribes: (() => void)[] = [];
  const subscribed = new Set<string>();
  // The client going away cancels the stream (request.signal may not say so behind every server).
  let cancelled = false;
  const stopped = () => cancelled || signal.aborted;
  const listen = (streamId: string) => {
    if (subscribed.has(streamId)) return;
    subscribed.add(streamId);
    unsubscribes.push(app.bus.subscribe(streamId, () => wake?.()));
  };
  return new ReadableStream({
    async start(controller) {
      const send = (text: string) => controller.enqueue(encoder.encode(text));
      let lastWrite = Date.now();
      send("retry: 2000\n\n");
      // One abort listener for the stream's life; one per wait (every second) piled up on the
      // request's signal until Node warned of a listener leak (MaxListenersExceededWarning).
      const onAbort = () => wake?.();
      signal.addEventListener("abort", onAbort, { once: true });
      try {
        listen(planId);
        while (!stopped()) {
          const runs = await app.db.pool.query<{ id: string }>("select id from runs where plan_id = $1", [planId]);
          for (const run of runs.rows) listen(run.id);
          const batch = await eventsAfter(app, planId, cursor);
          for (const event of batch) {
            if (stopped()) break;
            cursor[event.streamId] = event.seq;
            const { name, data } = payload(event, steps);
            send(`id: ${encodeCursor(cursor)}\nevent: ${name}\ndata: ${JSON.stringify(data)}\n\n`);
            lastWrite = Date.now();
          }
          if (batch.length === 1000) continue;
          if (Date.now() - lastWrite >= HEARTBEAT_MS) {
            send(": heartbeat\n\n");
            lastWrite = Date.now();
          }
          // New events wake this at once; new runs are found within a second.
          await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, 1_000);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
            if (stopped()) wake();
          });
        }
      } catch (error) {
        if (!stopped()) logger.error({ err: error, planId }, "plan event stream failed");
      } finally {
        signal.removeEventListener("abort", onAbort);
        for (const unsubscribe of unsubscribes) unsubscribe();
        try {
          controller.close();
        } catch {
          // already closed by the client going away
        }
      }
    },
    cancel() {
      cancelled = true;
      wake?.();
    },
  });
}
