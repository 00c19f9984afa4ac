import { z } from "zod";
import { HTTP_STATUS } from "./problem";
import { planApprove } from "../operations/plans";
import { mayCall } from "../operations/operation";
import type { AnyOperation } from "../operations/operation";
import { operations } from "../operations/registry";
import { chatInput } from "./chat-api";
import { createPlanInput } from "./plan-api";

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
      ...(!mayCall(operation, "agent") && {
        description: "A person's decision: refused (403 forbidden) with an agent's credential.",
      }),
      "x-stepwise-callers": operation.callers,
      requestBody: {
        required: true,
        content: { "application/json": { schema: jsonSchema(operation.input, "input") } },
      },
      responses: {
        "200": {
          description: "The operation's result",
          content: { "application/json": { schema: jsonSchema(operation.output, "output") } },
        },
        ...problemResponses,
      },
    },
  };
}

const problemResponses = {
  default: {
    description: "An error, as RFC 9457 problem+json with a stable `code`",
    content: { "application/problem+json": { schema: { $ref: "#/components/schemas/Problem" } } },
  },
};
const planIdParameter = { name: "planId", in: "path", required: true, schema: { type: "string" } };
const json = (schema: Record<string, unknown>) => ({ "application/json": { schema } });
const planEnvelope = {
  type: "object",
  required: ["plan", "traceId"],
  properties: {
    traceId: { type: "string", format: "uuid" },
    plan: {
      type: "object",
      required: ["id", "goal", "steps"],
      properties: {
        id: { type: "string" },
        version: { type: "integer" },
        goal: { type: "string" },
        successCriteria: { type: "array", items: { type: "string" } },
        steps: {
          type: "array",
          items: {
            type: "object",
            required: [
              "id",
              "action",
              "tool",
              "capability",
              "capabilityLabel",
              "labels",
              "timeoutSeconds",
              "approvalRequired",
            ],
            properties: {
              id: { type: "string" },
              action: { type: "string" },
              tool: { type: "string" },
              capability: { type: "string" },
              capabilityLabel: { type: "string" },
              labels: { type: "array", items: { type: "string" } },
              timeoutSeconds: { type: "integer" },
              approvalRequired: { type: "boolean" },
            },
          },
        },
      },
    },
  },
};

/** Seed 001's routes: plain JSON (and SSE) beside the operations endpoint. */
function planApiPaths() {
  return { ...planPaths(), ...runAndChatPaths() };
}

/** Creating a plan and reading it: its versions, events and runs. */
function planPaths() {
  return {
    "/api/plan": {
      post: {
        operationId: "createPlan",
        tags: ["Plan API"],
        summary: "Create a plan: a ready one ({goal, steps}), or planned by the configured LLM from a goal",
        description:
          "Stores version 1 for review, appends a queued plan.step event per step, and writes .plans/<id>/plan.json and plan.md in the workspace.",
        requestBody: { required: true, content: json(jsonSchema(createPlanInput, "input")) },
        responses: { "201": { description: "The stored plan", content: json(planEnvelope) }, ...problemResponses },
      },
    },
    "/api/plan/{planId}": {
      get: {
        operationId: "getPlan",
        tags: ["Plan API"],
        summary: "A plan (current version, or ?version=N) as JSON, or Markdown with Accept: text/markdown",
        parameters: [planIdParameter, { name: "version", in: "query", required: false, schema: { type: "integer" } }],
        responses: {
          "200": {
            description: "The plan",
            content: { ...json(planEnvelope), "text/markdown": { schema: { type: "string" } } },
          },
          ...problemResponses,
        },
      },
    },
    "/api/plan/{planId}/events": {
      get: {
        operationId: "planEvents",
        tags: ["Plan API"],
        summary: "The plan's and its runs' events: SSE (replay, then live; resume with Last-Event-ID) or JSON",
        parameters: [
          planIdParameter,
          { name: "Last-Event-ID", in: "header", required: false, schema: { type: "string" } },
          {
            name: "after",
            in: "query",
            required: false,
            schema: { type: "string" },
            description: "An event id to resume after",
          },
        ],
        responses: {
          "200": {
            description: "Step transitions arrive as `event: plan.step` with the step's id, state and result",
            content: {
              "text/event-stream": { schema: { type: "string" } },
              ...json({
                type: "object",
                properties: { planId: { type: "string" }, lastEventId: { type: "string" }, events: { type: "array" } },
              }),
            },
          },
          ...problemResponses,
        },
      },
    },
    "/api/plan/{planId}/versions": {
      get: {
        operationId: "planVersions",
        tags: ["Plan API"],
        summary: "Every version of a plan, newest first: who made it, from what source, and why",
        parameters: [planIdParameter],
        responses: { "200": { description: "The versions", content: json({ type: "object" }) }, ...problemResponses },
      },
    },
    "/api/plan/{planId}/runs": {
      get: {
        operationId: "planRuns",
        tags: ["Plan API"],
        summary: "The plan's runs, newest first",
        parameters: [planIdParameter],
        responses: { "200": { description: "The runs", content: json({ type: "object" }) }, ...problemResponses },
      },
    },
  };
}

/** Reading a run, the decisions that start and gate it, and the chat pass-through. */
function runAndChatPaths() {
  return {
    "/api/runs/{runId}": {
      get: {
        operationId: "getRun",
        tags: ["Plan API"],
        summary: "A run's state; each step with the idempotency key it presents on every attempt",
        parameters: [{ name: "runId", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
        responses: { "200": { description: "The run", content: json({ type: "object" }) }, ...problemResponses },
      },
    },
    "/api/plan/{planId}/approve": {
      post: {
        operationId: "approvePlan",
        tags: ["Plan API"],
        summary: "A person approves a version (default: the current one); its run starts",
        parameters: [planIdParameter],
        requestBody: {
          content: json({
            type: "object",
            properties: { version: { type: "integer" }, maxParallel: { type: "integer" } },
          }),
        },
        responses: {
          "201": { description: "The run", content: json(jsonSchema(planApprove.output, "output")) },
          ...problemResponses,
        },
      },
    },
    "/api/runs/{runId}/decide": {
      post: {
        operationId: "decideStep",
        tags: ["Plan API"],
        summary: "A person approves or denies a gated step",
        parameters: [{ name: "runId", in: "path", required: true, schema: { type: "string", format: "uuid" } }],
        requestBody: {
          required: true,
          content: json({
            type: "object",
            required: ["stepId", "approve"],
            properties: { stepId: { type: "string" }, approve: { type: "boolean" }, comment: { type: "string" } },
          }),
        },
        responses: { "200": { description: "Decided", content: json({ type: "object" }) }, ...problemResponses },
      },
    },
    "/api/chat": {
      post: {
        operationId: "chat",
        tags: ["Plan API"],
        summary: "Pass-through to the configured model providers, with a traceId; text streaming with stream: true",
        requestBody: { required: true, content: json(jsonSchema(chatInput, "input")) },
        responses: {
          "200": {
            description: "The provider's answer",
            content: {
              ...json({
                type: "object",
                properties: { traceId: { type: "string" }, model: { type: "string" }, text: { type: "string" } },
              }),
              "text/plain": { schema: { type: "string" } },
            },
          },
          ...problemResponses,
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
        "Every use case of Stepwise — agent sessions, plans and runs — as `POST /api/ops/<name>` with a JSON body. The same operations are the MCP server's tools and the `stepwise` CLI's verbs.",
    },
    ...(serverUrl && { servers: [{ url: serverUrl }] }),
    security: [{ bearer: [] }],
    paths: {
      ...planApiPaths(),
      ...Object.fromEntries(operations.map((operation) => [`/api/ops/${operation.name}`, pathItem(operation)])),
    },
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
