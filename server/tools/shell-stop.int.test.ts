import { spawn } from "node:child_process";
import fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { sandboxAvailable } from "./sandbox";
import { CommandStoppedError, runShell } from "./shell";
import { createTempWorkspace, createToolContext, removeTempWorkspace } from "./tool-test-support";
import { processesIn } from "../../tests/processes-in";

/**
 * Stop means stop, at the level of the command: an aborted shell command runs nothing after the
 * abort — not the script's next line, not a child it left behind — and the abort settles only once
 * every process of it is gone. Both paths: approved commands (unconfined, `unshare --pid`) and
 * read-only ones in the sandbox (bubblewrap). Real processes throughout.
 */

let workspace: string | undefined;
afterEach(async () => {
  await removeTempWorkspace(workspace);
  workspace = undefined;
});

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Starts `command`, aborts it once its log shows S, and returns what happened: when it settled,
 * which processes were there at that moment, and the log a few seconds after (well beyond the old
 * 2 s grace between SIGTERM and SIGKILL).
 */
async function abortAfterS(command: string, confine: boolean) {
  const ws = workspace!;
  const controller = new AbortController();
  const context = createToolContext(ws, controller.signal);
  const running = runShell(command, ws, context, {}, confine ? { workspace: ws } : undefined).then(
    () => ({ error: undefined as unknown, leftAtSettle: processesIn(ws) }),
    (error: unknown) => ({ error, leftAtSettle: processesIn(ws) }),
  );
  await expect.poll(() => context.logs.map((line) => line.message), { timeout: 60_000, interval: 20 }).toContain("S");
  const before = processesIn(ws);
  controller.abort(new Error("cancelled by the test"));
  const settled = await running;
  await sleep(4_000);
  return { ...settled, before, logs: context.logs.map((line) => line.message), leftAfter: processesIn(ws) };
}

const SCRIPT = "echo S; sleep 20; echo A; (sleep 1; echo B) & setsid sleep 30; echo C";

describe("an aborted shell command", () => {
  it("unconfined (approved): nothing after the abort runs, and it settles once every process is gone", async () => {
    workspace = await createTempWorkspace();
    const outcome = await abortAfterS(SCRIPT, false);
    expect(outcome.before.length).toBeGreaterThan(0);
    expect(outcome.logs).not.toContain("A");
    expect(outcome.logs).not.toContain("C");
    expect(outcome.leftAtSettle).toEqual([]);
    expect(outcome.leftAfter).toEqual([]);
    expect(outcome.error).toBeInstanceOf(CommandStoppedError);
    const report = (outcome.error as CommandStoppedError).stopReport;
    expect(report).toMatch(/^stopped: killed \d+ process/);
    // Every process that was there when the abort came is named among the killed.
    for (const pid of outcome.before) expect(report).toContain(String(pid));
    expect(outcome.logs).toContain(report);
  }, 120_000);

  it("a file written by the script's next line never appears", async () => {
    workspace = await createTempWorkspace();
    const outcome = await abortAfterS("echo S; sleep 20; echo A > marker", false);
    expect(outcome.leftAfter).toEqual([]);
    expect(fs.existsSync(`${workspace}/marker`)).toBe(false);
  }, 120_000);

  it.runIf(sandboxAvailable())(
    "confined (sandbox): the same",
    async () => {
      workspace = await createTempWorkspace();
      const outcome = await abortAfterS(SCRIPT, true);
      expect(outcome.before.length).toBeGreaterThan(0);
      expect(outcome.logs).not.toContain("A");
      expect(outcome.logs).not.toContain("C");
      expect(outcome.leftAtSettle).toEqual([]);
      expect(outcome.leftAfter).toEqual([]);
      expect(outcome.error).toBeInstanceOf(CommandStoppedError);
      for (const pid of outcome.before)
        expect((outcome.error as CommandStoppedError).stopReport).toContain(String(pid));
    },
    120_000,
  );

  it.runIf(sandboxAvailable())(
    "confined: a worker killed with SIGKILL leaves no process of the command",
    async () => {
      workspace = await createTempWorkspace();
      // A process of its own runs the command in the sandbox and is then SIGKILLed: no handler of
      // its runs, only what the kernel and the command's watchdog do.
      const child = spawn(
        process.execPath,
        [
          "--import",
          "tsx",
          "-e",
          `import { runShell } from "./server/tools/shell.ts";
         import { createToolContext } from "./server/tools/tool-test-support.ts";
         const ws = process.argv[1];
         const context = createToolContext(ws);
         context.log = (line) => console.log(line);
         void runShell(process.argv[2], ws, context, {}, { workspace: ws });`,
          workspace,
          "echo S; sleep 20; echo A; setsid sleep 30",
        ],
        { stdio: ["ignore", "pipe", "inherit"] },
      );
      let output = "";
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise((resolve) => child.on("exit", resolve));
      await expect.poll(() => output, { timeout: 300_000, interval: 50 }).toContain("S\n");
      expect(processesIn(workspace).length).toBeGreaterThan(0);
      child.kill("SIGKILL");
      await exited;
      await expect.poll(() => processesIn(workspace!), { timeout: 10_000 }).toEqual([]);
    },
    400_000,
  );
});
