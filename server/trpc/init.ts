import { initTRPC, TRPCError } from "@trpc/server";
import superjson from "superjson";
import type { z } from "zod";
import type { AppContext } from "../services";
import { isDatabaseUnavailable } from "../database-faults";
import { AppError, isAppError, isZodError, type AppErrorCode } from "../errors";
import type { Identity } from "../identity";
import { authorize, authorizeNow, type Operation } from "../operations/operation";

export interface TrpcContext {
  app: AppContext;
  /** Ends the connection a subscription runs on (the live socket) when its caller lost the right. */
  closeConnection?: () => void;
  /** Established by the door from a credential; never read from a request header. */
  identity: Identity;
  /** `identity.name`: the actor recorded in approvals and the audit. */
  actor: string;
}

export function createTrpcContext(app: AppContext, identity: Identity): TrpcContext {
  return { app, identity, actor: identity.name };
}

/** `operation`: the operation a procedure adapts, so its authority can be listed and tested. */
export interface ProcedureMeta {
  operation?: string;
}

const t = initTRPC
  .context<TrpcContext>()
  .meta<ProcedureMeta>()
  .create({
    transformer: superjson,
    errorFormatter({ shape, error }) {
      const cause = error.cause;
      return {
        ...shape,
        data: {
          ...shape.data,
          // Stable, documented codes for clients: what went wrong, and where.
          appError: isAppError(cause) ? cause.code : null,
          details: isAppError(cause) ? (cause.details ?? null) : null,
          zodIssues: isZodError(cause) ? cause.issues : null,
          stack: undefined,
        },
      };
    },
  });

const STATUS: Record<AppErrorCode, TRPCError["code"]> = {
  not_found: "NOT_FOUND",
  invalid_input: "BAD_REQUEST",
  invalid_plan: "UNPROCESSABLE_CONTENT",
  version_conflict: "CONFLICT",
  invalid_state: "PRECONDITION_FAILED",
  payload_too_large: "PAYLOAD_TOO_LARGE",
  unauthorized: "UNAUTHORIZED",
  forbidden: "FORBIDDEN",
  provider_error: "BAD_GATEWAY",
  unavailable: "SERVICE_UNAVAILABLE",
};

/**
 * Maps domain errors to tRPC errors; a database that cannot be reached is `unavailable` (503, worth
 * retrying); anything else is an internal error without its stack.
 */
const mapErrors = t.middleware(async ({ next }) => {
  const result = await next();
  if (!result.ok && isAppError(result.error.cause)) {
    const cause = result.error.cause;
    throw new TRPCError({ code: STATUS[cause.code], message: cause.message, cause });
  }
  if (!result.ok && isDatabaseUnavailable(result.error.cause ?? result.error)) {
    const cause = new AppError("unavailable", "The database is unavailable right now; try again shortly.");
    throw new TRPCError({ code: STATUS.unavailable, message: cause.message, cause });
  }
  return result;
});

export const router = t.router;
export const publicProcedure = t.procedure.use(mapErrors);

/**
 * A procedure that adapts an operation: the caller is checked against the operation's declared
 * callers before the input is even parsed (the same check `viaOperation` repeats), and the
 * procedure is tagged with the operation's name. Finish it with `.query(viaOperation(op))` or
 * `.mutation(viaOperation(op))`.
 */
export function operationProcedure<Input extends z.ZodType, Output extends z.ZodType>(
  operation: Operation<Input, Output>,
) {
  return publicProcedure
    .meta({ operation: operation.name })
    .use(({ ctx, next }) => {
      authorize(operation, ctx.identity, { authority: ctx.app.engine.authority });
      return next();
    })
    .input(operation.input);
}

/**
 * `operationProcedure` for an operation whose input fields are all optional, which the browser
 * also asks without input (`plans.list()`, `plans.tools()`): a missing input is the empty one. The
 * operation itself keeps an object input, which MCP needs for its tool's parameters.
 */
export function operationProcedureInputOptional<Input extends z.ZodType, Output extends z.ZodType>(
  operation: Operation<Input, Output>,
) {
  return publicProcedure
    .meta({ operation: operation.name })
    .use(({ ctx, next }) => {
      authorize(operation, ctx.identity, { authority: ctx.app.engine.authority });
      return next();
    })
    .input(
      operation.input
        .optional()
        .transform((value): z.output<Input> => (value === undefined ? operation.input.parse({}) : value)),
    );
}
/**
 * A procedure whose caller is checked against an operation's declared callers, for the event
 * subscriptions: what they stream is the operation's reads followed live, which only a
 * subscription carries, so the operation decides who may subscribe.
 */
export function authorizedBy(operation: Pick<Operation<z.ZodType, z.ZodType>, "name" | "callers" | "role">) {
  return publicProcedure.meta({ operation: operation.name }).use(({ ctx, next }) => {
    authorize(operation, ctx.identity, { authority: ctx.app.engine.authority });
    return next();
  });
}
export const createCallerFactory = t.createCallerFactory;

/**
 * For a subscription: before each delivery the caller, as they are now, must still be allowed the
 * operation the stream follows. A revoked credential or a role lowered below the operation's ends
 * the stream — and the live socket it runs on, whose other streams share the credential — at the
 * next delivery, instead of streaming on for as long as the connection lasts.
 */
export function stillAuthorized(
  ctx: TrpcContext,
  operation: Pick<Operation<z.ZodType, z.ZodType>, "name" | "callers" | "role">,
): () => Promise<void> {
  return async () => {
    try {
      await authorizeNow(ctx.app, operation, ctx.identity);
    } catch (error) {
      ctx.closeConnection?.();
      throw error;
    }
  };
}
