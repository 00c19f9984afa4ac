import { z } from "zod";
import type { Span } from "@opentelemetry/api";
import { AppError } from "../errors";
import { logger } from "../logger";
import { inSpan } from "../telemetry";
import { problemResponse } from "./problem";

/**
 * What the plan HTTP API's handlers share: screening path parameters before
 * anything looks them up, and answering every error as problem+json inside the route's span.
 */

export function parse<T extends z.ZodType>(schema: T, value: unknown): z.output<T> {
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
export function screenRunId(runId: string): void {
  if (!z.uuid().safeParse(runId).success) invalidParameter("runId", "runId must be a run's id (a UUID)");
}

export function screenPlanId(planId: string): void {
  if (planId.length === 0 || planId.length > 100 || /[\p{Cc}]/u.test(planId)) {
    invalidParameter("planId", "planId must be a plan's id (1–100 characters, no control characters)");
  }
}

/** The largest value PostgreSQL's `integer` holds, which plan versions are. */
const MAX_VERSION = 2_147_483_647;

export function versionParameter(value: string | null): number | undefined {
  if (value === null) return undefined;
  const version = /^[1-9][0-9]{0,9}$/.test(value) ? Number(value) : Number.NaN;
  if (!(version <= MAX_VERSION)) invalidParameter("version", `version must be a whole number from 1 to ${MAX_VERSION}`);
  return version;
}

function invalidParameter(name: string, message: string): never {
  throw new AppError("invalid_input", message, { issues: [{ path: [name], message }] });
}

/** Every handler runs in a span named for its route; errors become problem+json inside it. */
export function respond(route: string, work: (span: Span) => Promise<Response>): Promise<Response> {
  return inSpan(route, { "http.route": route }, async (span) => {
    let response: Response;
    try {
      response = await work(span);
    } catch (error) {
      if (!(error instanceof AppError)) logger.error({ err: error, route }, "HTTP API request failed");
      response = problemResponse(error);
    }
    span.setAttribute("http.response.status_code", response.status);
    return response;
  });
}

export function traced(span: Span, plan: { id: string; traceId: string }): void {
  span.setAttributes({ "stepwise.plan_id": plan.id, "stepwise.trace_id": plan.traceId });
}
