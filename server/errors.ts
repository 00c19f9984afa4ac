import type { ZodError } from "zod";
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

const KINDS = Symbol.for("stepwise.errorKinds");

/**
 * `instanceof` that holds across copies of a module. `stepwise serve` runs the CLI's modules and
 * the web server's bundle of the same modules in one process, sharing one app context (see
 * app-context.ts): an error made from one copy's class reaches code that imports the other's,
 * where plain `instanceof` is false — a gentle stop then failed a step, a retryable tool error
 * was not retried, an AppError became a 500. A class that can cross calls `markKind` in its
 * constructor and answers `instanceof` with `hasKind` (each subclass names itself again).
 */
export function markKind(error: Error, kind: string): void {
  const marked = error as Error & { [KINDS]?: string[] };
  marked[KINDS] = [...(marked[KINDS] ?? []), kind];
}

export function hasKind(value: unknown, kind: string): boolean {
  if (typeof value !== "object" || value === null) return false;
  const kinds = (value as { [KINDS]?: unknown })[KINDS];
  return Array.isArray(kinds) && kinds.includes(kind);
}

export class AppError extends Error {
  static [Symbol.hasInstance](value: unknown): boolean {
    return hasKind(value, "AppError");
  }

  constructor(
    readonly code: AppErrorCode,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "AppError";
    markKind(this, "AppError");
  }
}

export function isAppError(error: unknown): error is AppError {
  return error instanceof AppError;
}

/**
 * A zod validation error from either copy of zod (the web server bundles its own; see markKind),
 * told by its name and issues rather than by `instanceof`.
 */
export function isZodError(error: unknown): error is ZodError {
  return error instanceof Error && error.name === "ZodError" && Array.isArray((error as { issues?: unknown }).issues);
}
