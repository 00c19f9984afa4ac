import { z } from "zod";
import type { AppContext } from "../app-context";
import { AppError } from "../errors";
import type { Identity } from "./identity";

/**
 * The operations layer: every use case an outside caller may perform, defined once, framework-free.
 * tRPC routers, the HTTP API, the MCP server and the CLI are adapters of a few lines over these:
 * they establish the caller's identity (the door), pass the raw input, and map `AppError` codes to
 * their own status codes. Input and output are zod schemas, so each adapter can also describe the
 * operation (OpenAPI, MCP tool schemas, CLI help) from the same source.
 */
export interface OperationContext {
  app: AppContext;
  identity: Identity;
  /** Set by doors that can report progress of a long call (MCP progress notifications). */
  progress?: (progress: number, total: number | undefined, message: string) => void;
  /** Fires when the caller goes away (a cancelled MCP request, a closed connection). */
  signal?: AbortSignal;
}

export interface Operation<Input extends z.ZodType, Output extends z.ZodType> {
  /** Stable dotted name, e.g. `agent.status`; adapters derive routes and tool names from it. */
  name: string;
  summary: string;
  input: Input;
  output: Output;
  /** What the operation does to the world (MCP tool annotations, documentation). */
  annotations?: { readOnly?: boolean; destructive?: boolean; idempotent?: boolean };
  /** `person`: decisions (approve, deny, answer) that agent-facing doors such as MCP do not offer. */
  audience?: "person";
  run(context: OperationContext, input: z.output<Input>): Promise<z.input<Output>>;
}

export function defineOperation<Input extends z.ZodType, Output extends z.ZodType>(
  operation: Operation<Input, Output>,
): Operation<Input, Output> {
  return operation;
}

/**
 * Parses the raw input (a clear `invalid_input` naming every bad field, before anything changes),
 * runs the operation, and returns its output as the output schema shapes it.
 */
export async function invokeOperation<Input extends z.ZodType, Output extends z.ZodType>(
  operation: Operation<Input, Output>,
  context: OperationContext,
  rawInput: unknown,
): Promise<z.output<Output>> {
  const parsed = operation.input.safeParse(rawInput);
  if (!parsed.success) {
    throw new AppError("invalid_input", `Invalid input for ${operation.name}: ${z.prettifyError(parsed.error)}`, {
      issues: parsed.error.issues.map((issue) => ({ path: issue.path.map(String), message: issue.message })),
    });
  }
  const result = await operation.run(context, parsed.data);
  return operation.output.parse(result);
}

/**
 * The tRPC door's adapter: a procedure body that runs the operation for the caller the door
 * proved. tRPC has already parsed the input with `operation.input`.
 */
export function viaOperation<Input extends z.ZodType, Output extends z.ZodType>(operation: Operation<Input, Output>) {
  return ({ ctx, input }: { ctx: OperationContext; input: z.output<Input> }) => operation.run(ctx, input);
}
