import { describe, expect, it } from "vitest";
import { z } from "zod";
import { snakeCase, snakeSchema, toOperationInput, toSnakeAnswer } from "./naming";

describe("the MCP door's naming convention", () => {
  it("names fields in snake_case", () => {
    expect(["planId", "waitSeconds", "approvedBy", "id", "maxParallel"].map(snakeCase)).toEqual([
      "plan_id",
      "wait_seconds",
      "approved_by",
      "id",
      "max_parallel",
    ]);
  });

  it("translates a call's arguments to the operation's input, refusing unknown ones with the accepted names", () => {
    const input = z.object({
      planId: z.string(),
      waitSeconds: z.number().optional(),
      draft: z.looseObject({ goal: z.string(), steps: z.array(z.looseObject({})) }).optional(),
    });
    const mcp = snakeSchema(input, "input");
    const refused = mcp.safeParse({ plan_id: "p", waitSeconds: 3 });
    expect(refused.success).toBe(false);
    expect(refused.error!.issues[0]!.message).toBe(
      "Unknown parameter 'waitSeconds'; accepted: plan_id, wait_seconds, draft",
    );
    const args = {
      plan_id: "p",
      wait_seconds: 3,
      draft: { goal: "g", steps: [{ id: "a", depends_on: [], args: { file_path: "x" } }] },
    };
    expect(mcp.safeParse(args).success).toBe(true);
    expect(input.parse(toOperationInput(args, input))).toEqual({
      planId: "p",
      waitSeconds: 3,
      draft: { goal: "g", steps: [{ id: "a", dependsOn: [], args: { file_path: "x" } }] },
    });
  });

  it("answers in snake_case, leaving a tool's arguments and results as the tool named them", () => {
    expect(
      toSnakeAnswer({
        planId: "p",
        steps: [{ stepId: "s", dependsOn: [], args: { maxCount: 1 }, result: { ok: true, value: { exitCode: 0 } } }],
      }),
    ).toEqual({
      plan_id: "p",
      steps: [{ step_id: "s", depends_on: [], args: { maxCount: 1 }, result: { ok: true, value: { exitCode: 0 } } }],
    });
  });
});
