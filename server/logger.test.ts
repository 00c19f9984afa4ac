import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";

/** The lint guard that keeps server code on the structured logger (eslint.config.js). */
describe("no console in server code", () => {
  const eslint = new ESLint();
  const rulesHit = async (code: string, filePath: string) => {
    const [result] = await eslint.lintText(code, { filePath });
    return result!.messages.map((message) => message.ruleId);
  };

  it("fails lint on console.* in server/, and allows it in tests", async () => {
    const code = "export function f(runId: string) {\n  console.error(`run ${runId} failed`);\n}\n";
    expect(await rulesHit(code, "server/engine/example.ts")).toContain("no-console");
    expect(await rulesHit(code, "server/engine/example.test.ts")).not.toContain("no-console");
  });
});
