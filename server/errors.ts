/**
 * Domain errors carry a stable code that every interface (tRPC, HTTP, MCP, CLI) maps to its own
 * status, so callers can react to "why" without parsing messages.
 */
export type AppErrorCode =
  | "not_found"
  | "invalid_input"
  | "invalid_plan"
  | "version_conflict"
  | "invalid_state"
  | "payload_too_large"
  | "unauthorized"
  | "forbidden"
  | "provider_error"
  /** Something the server needs is not set up (an LLM provider): 503, with what to configure. */
  | "unavailable";

export class AppError extends Error {
  constructor(
    readonly code: AppErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "AppError";
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}
