import { describe, expect, it } from "vitest";
import { stepInputSchema } from "../plan-schema";
import { builtinTools } from "./registry";

describe("built-in tools' defaults", () => {
  it("fill a step with fields every check accepts: a default timeout a step may declare", () => {
    for (const tool of builtinTools) {
      const parsed = stepInputSchema.shape.timeoutSeconds.safeParse(tool.defaultTimeoutSeconds);
      expect(parsed.success, `${tool.name}: defaultTimeoutSeconds ${tool.defaultTimeoutSeconds}`).toBe(true);
    }
  });
});
