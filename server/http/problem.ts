import { isDatabaseUnavailable } from "../database-faults";
import { isAppError, isZodError, type AppErrorCode } from "../errors";

/**
 * Errors of the plain HTTP doors (HTTP API, operations endpoint, MCP over HTTP) as RFC 9457
 * problem+json, carrying the same stable `code` the browser UI shows. Anything that is not an
 * AppError is an internal error whose message and stack stay in the server log.
 */
export const HTTP_STATUS: Record<AppErrorCode, number> = {
  not_found: 404,
  invalid_input: 400,
  invalid_plan: 422,
  version_conflict: 409,
  invalid_state: 412,
  payload_too_large: 413,
  unauthorized: 401,
  forbidden: 403,
  provider_error: 502,
  unavailable: 503,
};

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: AppErrorCode | "internal";
  details?: unknown;
}

export function toProblem(error: unknown): Problem {
  if (isAppError(error)) {
    return {
      type: `https://stepwise.dev/problems/${error.code}`,
      title: error.code.replace(/_/g, " "),
      status: HTTP_STATUS[error.code],
      detail: error.message,
      code: error.code,
      ...(error.details !== undefined && { details: error.details }),
    };
  }
  if (isZodError(error)) {
    return {
      type: "https://stepwise.dev/problems/invalid_input",
      title: "invalid input",
      status: 400,
      detail: "The request does not match the expected shape.",
      code: "invalid_input",
      details: { issues: error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })) },
    };
  }
  if (isDatabaseUnavailable(error)) {
    // Not a bug in Stepwise and not the caller's fault: the same request will work shortly.
    return {
      type: "https://stepwise.dev/problems/unavailable",
      title: "unavailable",
      status: 503,
      detail: "The database is unavailable right now; try again shortly.",
      code: "unavailable",
    };
  }
  return {
    type: "https://stepwise.dev/problems/internal",
    title: "internal error",
    status: 500,
    detail: "Something went wrong inside Stepwise; the server log has the details.",
    code: "internal",
  };
}

/** What a 503 tells clients to wait before trying again. */
export const RETRY_AFTER_SECONDS = 5;

export function problemResponse(error: unknown): Response {
  const problem = toProblem(error);
  return new Response(JSON.stringify(problem), {
    status: problem.status,
    headers: {
      "content-type": "application/problem+json",
      ...(problem.status === 503 && { "retry-after": String(RETRY_AFTER_SECONDS) }),
    },
  });
}
