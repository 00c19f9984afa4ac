import { readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { AGENT_INSTRUCTIONS } from "./instructions";

describe("agent instructions", () => {
  it("docs/agents.md is exactly what sessions sync to agents", () => {
    expect(readFileSync(new URL("../../docs/agents.md", import.meta.url), "utf8")).toBe(AGENT_INSTRUCTIONS);
  });
});
