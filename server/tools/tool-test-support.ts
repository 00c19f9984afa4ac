import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import type { ToolContext, ToolDefinition } from "./types";

/** Test support: a real temporary workspace holding the given files (path → content). */
export async function createTempWorkspace(files: Record<string, string | Buffer> = {}): Promise<string> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-tools-")));
  await writeFiles(root, files);
  return root;
}

export async function writeFiles(root: string, files: Record<string, string | Buffer>): Promise<void> {
  for (const [relative, content] of Object.entries(files)) {
    const file = path.join(root, relative);
    await fs.mkdir(path.dirname(file), { recursive: true });
    await fs.writeFile(file, content);
  }
}

export async function removeTempWorkspace(root: string | undefined): Promise<void> {
  if (root) await fs.rm(root, { recursive: true, force: true });
}

export interface RecordingContext extends ToolContext {
  logs: { message: string; level: string }[];
  progress: number[];
}

export function createToolContext(workspaceRoot: string, signal = new AbortController().signal): RecordingContext {
  const logs: { message: string; level: string }[] = [];
  const progress: number[] = [];
  return {
    signal,
    workspaceRoot,
    runId: "run-test",
    stepId: "step_1",
    attempt: 1,
    idempotencyKey: "run-test:step_1",
    effectsStarting: async () => undefined,
    reportProgress: (percent) => progress.push(percent),
    log: (message, level = "info") => logs.push({ message, level }),
    logs,
    progress,
  };
}

/** Runs a tool the way the engine does: raw arguments parsed by the tool's schema first. */
export async function runTool<Input, Output>(
  tool: ToolDefinition<Input, Output>,
  rawInput: unknown,
  context: ToolContext,
): Promise<Output> {
  return tool.execute(tool.inputSchema.parse(rawInput), context);
}

/** Resolves to the error a promise rejects with, or fails when it fulfils. */
export async function rejectionOf(promise: Promise<unknown>): Promise<Error> {
  const outcome = await promise.then(
    (value) => ({ fulfilled: true as const, value }),
    (error: unknown) => ({ fulfilled: false as const, error }),
  );
  if (outcome.fulfilled) throw new Error(`Expected a rejection, got ${JSON.stringify(outcome.value)}`);
  return outcome.error as Error;
}
