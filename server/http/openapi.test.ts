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

  it("documents every operation, from the schemas the operations validate with", () => {
    const document = openApiDocument();
    expect(Object.keys(document.paths).sort()).toEqual(
      operations.map((operation) => `/api/ops/${operation.name}`).sort(),
    );
    const update = document.paths["/api/ops/agent.update"]!.post;
    expect(update.requestBody.content["application/json"].schema).toEqual(
      (({ $schema: _, ...rest }) => rest)(
        z.toJSONSchema(agentUpdate.input, { io: "input", unrepresentable: "any" }) as Record<string, unknown>,
      ),
    );
    expect(document.paths["/api/ops/plan.approve"]!.post.description).toContain("person");
  });
});
