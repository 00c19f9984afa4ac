import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import { createServer } from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, expect, it } from "vitest";
import { startHarness } from "../../tests/app-harness";
import { startTcpProxy } from "../../tests/tcp-proxy";

/**
 * A supervisor may start workers before their database: `stepwise worker` started while nothing
 * listens at DATABASE_URL's port waits, saying so on one line every ~10 s (its output is a pipe
 * here), and works once PostgreSQL answers there. The real CLI, as a process.
 */
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const bin = path.join(projectRoot, "bin/stepwise.mjs");
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const { port } = probe.address() as { port: number };
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

it(
  "a worker started before PostgreSQL waits for it, showing progress, then runs steps",
  { timeout: 600_000 },
  async () => {
    const harness = await startHarness({ worker: false });
    cleanups.push(() => harness.close());
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-wait-"));
    cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
    const port = await freePort();
    const target = new URL(harness.databaseUrl);
    const url = new URL(harness.databaseUrl);
    url.hostname = "127.0.0.1";
    url.port = String(port);

    const { DATABASE_URL: _unset, ...env } = process.env;
    const child = spawn(process.execPath, [bin, "worker"], {
      cwd: projectRoot,
      env: { ...env, DATABASE_URL: url.toString(), STEPWISE_DATA_DIR: dataDir, STEPWISE_WORKSPACE: harness.workspace },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const exited = new Promise<number | null>((resolve) => child.on("exit", resolve));
    cleanups.push(async () => {
      child.kill("SIGKILL");
      await exited;
    });

    const waiting = new RegExp(
      `^\\[stepwise\\] waiting for PostgreSQL at 127\\.0\\.0\\.1:${port} \\(connection refused\\) — (\\d+) s$`,
      "gm",
    );
    // The first line at once, and another about 10 s later: still waiting, not exited.
    await expect.poll(() => [...output.matchAll(waiting)].length, { timeout: 120_000 }).toBeGreaterThanOrEqual(2);
    expect(child.exitCode).toBe(null);
    const seconds = [...output.matchAll(waiting)].map((match) => Number(match[1]));
    expect(seconds[1]! - seconds[0]!).toBeGreaterThanOrEqual(9);
    // Piped output gets a line every ~10 s, not one per attempt (attempts are a second apart).
    expect(output).not.toContain("\r");

    const proxy = await startTcpProxy({ host: target.hostname, port: Number(target.port || 5432) }, port);
    cleanups.push(() => proxy.close());
    await expect.poll(() => output, { timeout: 300_000 }).toContain("Worker started");
    expect(output).toMatch(new RegExp(`PostgreSQL at 127\\.0\\.0\\.1:${port} answered after \\d+ s`));

    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "after the wait",
        steps: [{ id: "hello", description: "say hi", tool: "shell", args: { command: "echo hi" } }],
      }),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled"], 120_000);
    expect(run.status).toBe("completed");
    expect(child.exitCode).toBe(null);
  },
);
