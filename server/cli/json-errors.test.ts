import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { expect, it } from "vitest";

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));

/** Runs the CLI and returns its exit code and output, whether it succeeded or not. */
function stepwise(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "server/cli/main.ts", ...args],
      { cwd: projectRoot, env: { ...process.env, STEPWISE_URL: "", STEPWISE_TOKEN: "" } },
      (error, stdout, stderr) => resolve({ code: error ? Number(error.code) : 0, stdout, stderr }),
    );
  });
}

it.each([
  {
    name: "a payload that is not JSON",
    args: ["update", "--json", "{not json"],
    errorType: "usage",
    code: 2,
    message: /not valid JSON/,
  },
  {
    name: "an unknown option",
    args: ["status", "--json", "--colour"],
    errorType: "usage",
    code: 2,
    message: /unknown option '--colour'/,
  },
  {
    name: "no server to talk to",
    args: ["status", "--json", "--server", "http://127.0.0.1:9"],
    errorType: "no_server",
    code: 3,
    message: /./,
  },
])("with --json, $name is a JSON error on stdout", { timeout: 60_000 }, async ({ args, errorType, code, message }) => {
  const result = await stepwise(args);
  expect(result.code).toBe(code);
  const answer = JSON.parse(result.stdout) as { status: string; error_type: string; message: string };
  expect(answer).toMatchObject({ status: "error", message: expect.stringMatching(message) });
  if (errorType !== "no_server") expect(answer.error_type).toBe(errorType);
  expect(result.stderr).toBe("");
});

it("without --json a usage error stays text for a person", { timeout: 60_000 }, async () => {
  const result = await stepwise(["status", "--colour"]);
  expect(result.code).toBe(2);
  expect(result.stdout).toBe("");
  expect(result.stderr).toMatch(/unknown option '--colour'/);
});
