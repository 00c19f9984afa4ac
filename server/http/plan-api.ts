import type { AppContext } from "../services";
import { invokeOperation } from "../operations/operation";
import { planVersions } from "../operations/plan-reads";
import { planApprove, planGet, planMarkdown } from "../operations/plans";
import { runDecide, runGet, runListForPlan } from "../operations/runs";
import { createPlanInput, planSubmit, apiPlan } from "../operations/plan-http-api";
import { identityOf } from "./request-identity";
import { parse, respond, screenPlanId, screenRunId, traced, versionParameter } from "./plan-api-shared";
import { readJsonBody } from "./input-guard";

/**
 * Seed 001's orchestrator API as plain JSON over HTTP: `POST /api/plan`, `GET /api/plan/:id`,
 * `GET /api/plan/:id/events` (SSE, or JSON; server/http/plan-events-api.ts), `POST
 * /api/plan/:id/approve` and `POST /api/runs/:id/decide`. Handlers parse, call the operations
 * layer (which checks the caller), and shape seed 001's answers; every error is problem+json.
 * Identity comes from the door.
 */
export { createPlanInput, apiPlan, apiStep } from "../operations/plan-http-api";
export { planEventsFromApi, sseStream } from "./plan-events-api";

/** `POST /api/plan`: a ready plan is validated and stored; a bare goal is planned by the LLM. */
export function createPlanFromApi(request: Request, app: AppContext): Promise<Response> {
  return respond("POST /api/plan", async (span) => {
    const identity = identityOf(request);
    const input = parse(createPlanInput, await readJsonBody(request));
    const created = await invokeOperation(planSubmit, { app, identity }, input);
    traced(span, { id: created.plan.id, traceId: created.traceId });
    return Response.json(created, { status: 201 });
  });
}

/** `GET /api/plan/:id`: JSON in seed 001's shape, or Markdown with `Accept: text/markdown`. */
export function getPlanFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id", async (span) => {
    const identity = identityOf(request);
    screenPlanId(planId);
    const version = versionParameter(new URL(request.url).searchParams.get("version"));
    const input = { planId, ...(version !== undefined && { version }) };
    const plan = await invokeOperation(planGet, { app, identity }, input);
    traced(span, plan);
    if ((request.headers.get("accept") ?? "").includes("text/markdown")) {
      const { markdown } = await invokeOperation(planMarkdown, { app, identity }, input);
      return new Response(markdown, { headers: { "content-type": "text/markdown; charset=utf-8" } });
    }
    return Response.json({ plan: apiPlan(plan), traceId: plan.traceId });
  });
}

/** `GET /api/plan/:id/versions`: every version, newest first, with who made it and why. */
export function planVersionsFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id/versions", async () => {
    const identity = identityOf(request);
    screenPlanId(planId);
    const { versions } = await invokeOperation(planVersions, { app, identity }, { planId });
    return Response.json({ planId, versions });
  });
}

/** `GET /api/plan/:id/runs`: the plan's runs, newest first. */
export function planRunsFromApi(request: Request, app: AppContext, planId: string): Promise<Response> {
  return respond("GET /api/plan/:id/runs", async () => {
    const identity = identityOf(request);
    screenPlanId(planId);
    // An unknown plan is a 404, not an empty list.
    await invokeOperation(planGet, { app, identity }, { planId });
    const { runs } = await invokeOperation(runListForPlan, { app, identity }, { planId });
    return Response.json({ planId, runs });
  });
}

/**
 * `GET /api/runs/:id`: a run's state, each step with the idempotency key it presents on every
 * attempt — replays after a crash included — so side effects can be de-duplicated downstream.
 */
export function runFromApi(request: Request, app: AppContext, runId: string): Promise<Response> {
  return respond("GET /api/runs/:id", async (span) => {
    const identity = identityOf(request);
    screenRunId(runId);
    const run = await invokeOperation(runGet, { app, identity }, { runId });
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
    const body = (await readJsonBody(request)) as Record<string, unknown>;
    const version = body.version ?? (await invokeOperation(planGet, { app, identity }, { planId })).version;
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
    const body = (await readJsonBody(request)) as Record<string, unknown>;
    return Response.json(await invokeOperation(runDecide, { app, identity }, { ...body, runId }));
  });
}
