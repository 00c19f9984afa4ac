import { z } from "zod";
import type { AppContext } from "../services";
import { AppError } from "../errors";
import { logger } from "../logger";
import { inSpan } from "../telemetry";
import { invokeOperation } from "../operations/operation";
import { findOperation, operations } from "../operations/registry";
import { readJsonBody } from "./input-guard";
import { problemResponse, toProblem } from "./problem";
import { identityOf } from "./request-identity";

/**
 * `POST /api/ops/<name>`: any operation of the registry, with its input as the JSON body and its
 * output as the JSON answer — the CLI's transport. `GET /api/ops` lists the operations with their
 * input and output JSON Schemas. Errors are problem+json with the operation's stable code.
 */
export function handleOperation(request: Request, app: AppContext, name: string): Promise<Response> {
  return inSpan(`POST /api/ops/${name}`, { "http.route": "POST /api/ops/:name", "stepwise.operation": name }, () =>
    runOperation(request, app, name),
  );
}

async function runOperation(request: Request, app: AppContext, name: string): Promise<Response> {
  try {
    const identity = identityOf(request);
    const operation = findOperation(name);
    if (!operation) throw new AppError("not_found", `No operation ${name}; GET /api/ops lists them`);
    const input = await readJsonBody(request, { empty: {} });
    const output = await invokeOperation(operation, { app, identity }, input);
    return Response.json(output);
  } catch (error) {
    if (toProblem(error).status === 500) logger.error({ err: error, operation: name }, "operation failed");
    return problemResponse(error);
  }
}

export function listOperations(request: Request): Response {
  try {
    identityOf(request);
  } catch (error) {
    return problemResponse(error);
  }
  return Response.json({
    operations: operations.map((operation) => ({
      name: operation.name,
      summary: operation.summary,
      path: `/api/ops/${operation.name}`,
      callers: operation.callers,
      input: z.toJSONSchema(operation.input, { io: "input", unrepresentable: "any" }),
      output: z.toJSONSchema(operation.output, { io: "output", unrepresentable: "any" }),
      ...(operation.annotations && { annotations: operation.annotations }),
    })),
  });
}
