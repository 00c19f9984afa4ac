import { ESLint } from "eslint";
import { describe, expect, it } from "vitest";
import { formatLogLine, logFormat } from "./logger";

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
    // Loading the project's ESLint configuration (typed rules) took 36 s at load 27 on 2 cores.
  }, 180_000);
});

describe("log format", () => {
  it("is text for a person at a terminal and JSON for everything else, unless chosen", () => {
    expect(logFormat({}, true)).toBe("text");
    expect(logFormat({}, false)).toBe("json");
    expect(logFormat({ STEPWISE_LOG_FORMAT: "json" }, true)).toBe("json");
    expect(logFormat({ STEPWISE_LOG_FORMAT: "text" }, false)).toBe("text");
  });

  it("turns a JSON line into one readable line with its fields and error", () => {
    const time = new Date(2026, 0, 2, 3, 4, 5).getTime();
    const line = formatLogLine(
      JSON.stringify({
        level: 40,
        time,
        service: "stepwise",
        component: "worker",
        aborted: 1,
        runId: "r-1",
        err: { type: "Error", message: "boom", stack: "Error: boom\n    at x" },
        msg: "grace period over",
      }),
    );
    expect(line).toBe("03:04:05 warn worker: grace period over — Error: boom (aborted=1, runId=r-1)\n");
    expect(line).not.toContain("    at ");
  });
});
