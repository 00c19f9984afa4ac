import { z } from "zod";
import { HTTP_STATUS } from "./problem";
import { operations, type AnyOperation } from "../operations/registry";

/**
 * OpenAPI 3.1 for the operations endpoint, generated from the same zod schemas the operations
 * validate with, so it cannot drift: `POST /api/ops/<name>` per operation, problem+json errors
 * with their stable codes, and the two credentials (access token for people, agent token for
 * agents). Served at `/api/openapi.json`.
 */
function jsonSchema(schema: z.ZodType, io: "input" | "output"): Record<string, unknown> {
  const { $schema: _ignored, ...rest } = z.toJSONSchema(schema, { io, unrepresentable: "any" }) as Record<
    string,
    unknown
  >;
  return rest;
}

function pathItem(operation: AnyOperation) {
  return {
    post: {
      operationId: operation.name.replaceAll(".", "_"),
      summary: operation.summary,
      tags: [operation.name.split(".")[0]!],
      ...(operation.audience === "person" && {
        description: "A person's decision: refused (403 forbidden) with an agent's credential.",
      }),
      requestBody: {
        required: true,
        content: { "application/json": { schema: jsonSchema(operation.input, "input") } },
      },
      responses: {
        "200": {
          description: "The operation's result",
          content: { "application/json": { schema: jsonSchema(operation.output, "output") } },
        },
        default: {
          description: "An error, as RFC 9457 problem+json with a stable `code`",
          content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
        },
      },
    },
  };
}

export function openApiDocument(serverUrl?: string) {
  return {
    openapi: "3.1.0",
    info: {
      title: "Stepwise operations API",
      version: "0.1.0",
      description:
        "Every use case of Stepwise — agent sessions (seed 003), plans and runs — as `POST /api/ops/<name>` with a JSON body. The same operations are the MCP server's tools and the `stepwise` CLI's verbs.",
    },
    ...(serverUrl && { servers: [{ url: serverUrl }] }),
    security: [{ bearer: [] }],
    paths: Object.fromEntries(operations.map((operation) => [`/api/ops/${operation.name}`, pathItem(operation)])),
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "STEPWISE_ACCESS_TOKEN (a person), or the agent token from <data>/server.json (an agent). On loopback without an access token, requests without a credential act as the local person.",
        },
      },
      schemas: {
        Problem: {
          type: "object",
          required: ["type", "title", "status", "detail", "code"],
          properties: {
            type: { type: "string" },
            title: { type: "string" },
            status: { type: "integer" },
            detail: { type: "string" },
            code: { type: "string", enum: [...Object.keys(HTTP_STATUS), "internal"] },
            details: {},
          },
        },
      },
    },
  };
}
