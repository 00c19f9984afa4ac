import { Validator } from "@seriousme/openapi-schema-validator";
import { describe, expect, it } from "vitest";
import { z } from "zod";
import { agentUpdate } from "../operations/agent";
import { operations } from "../operations/registry";
import { openApiDocument } from "./openapi";

describe("the OpenAPI document", () => {
  it("is valid OpenAPI 3.1 according to a standard validator", async () => {
    const validator = new Validator();
    const result = await validator.validate(JSON.parse(JSON.stringify(openApiDocument("http://127.0.0.1:3000"))));
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(validator.version).toBe("3.1");
  });

  it("documents every operation, from the schemas the operations validate with, and seed 001's routes", () => {
    const paths = openApiDocument().paths as Record<string, { post?: Record<string, any> }>; // eslint-disable-line @typescript-eslint/no-explicit-any
    expect(
      Object.keys(paths)
        .filter((route) => route.startsWith("/api/ops/"))
        .sort(),
    ).toEqual(operations.map((operation) => `/api/ops/${operation.name}`).sort());
    expect(Object.keys(paths)).toEqual(
      expect.arrayContaining(["/api/plan", "/api/plan/{planId}", "/api/plan/{planId}/events", "/api/chat"]),
    );
    const { $schema: _ignored, ...input } = z.toJSONSchema(agentUpdate.input, { io: "input", unrepresentable: "any" });
    expect(paths["/api/ops/agent.update"]!.post!.requestBody.content["application/json"].schema).toEqual(input);
    expect(paths["/api/ops/plan.approve"]!.post!.description).toContain("person");
  });
});
