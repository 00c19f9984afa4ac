import { spawn } from "node:child_process";
import path from "node:path";
import { E2E_DATA_DIR } from "./e2e-env";

export interface ProcessResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Runs a Node.js script to its end as a subprocess (the CLI, the MCP Inspector) and collects its output. */
export function runNode(
  script: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, ...args], { cwd: options.cwd, env: options.env });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("exit", (code) => resolve({ code, stdout, stderr }));
  });
}

/**
 * The `stepwise` executable as an agent runs it from its workspace: it finds the browser tests'
 * server through the server.json in their data folder (no URL or token of the caller's own).
 */
export function stepwiseCli(cwd: string, ...args: string[]): Promise<ProcessResult> {
  return runNode(path.resolve("bin/stepwise.mjs"), args, {
    cwd,
    env: {
      ...process.env,
      STEPWISE_DATA_DIR: E2E_DATA_DIR,
      STEPWISE_AGENT: "e2e-agent",
      STEPWISE_URL: "",
      STEPWISE_TOKEN: "",
    },
  });
}
