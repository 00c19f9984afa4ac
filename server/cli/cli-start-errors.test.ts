import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import { createServer, type Server } from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, beforeEach, describe, expect, it } from "vitest";

const projectRoot = fileURLToPath(new URL("../../", import.meta.url));
const tsx = path.join(projectRoot, "node_modules/tsx/dist/cli.mjs");

let dataDir: string;
let blocker: Server | undefined;

beforeEach(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-cli-"));
});

afterEach(async () => {
  if (blocker) await new Promise((resolve) => blocker!.close(resolve));
  blocker = undefined;
  await fs.rm(dataDir, { recursive: true, force: true });
});

/** Runs the real CLI as a subprocess and collects its exit code and output. */
function runCli(command: string, env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const { DATABASE_URL: _ignored, ...inherited } = process.env;
    const child = spawn(process.execPath, [tsx, "server/cli/main.ts", command], {
      cwd: projectRoot,
      env: { ...inherited, STEPWISE_DATA_DIR: dataDir, ...env },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`CLI did not exit; output so far:\n${output}`));
    }, 60_000);
    child.on("exit", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** A postmaster.pid naming a live process, as a running Stepwise's embedded PostgreSQL leaves. */
async function pretendAnotherStepwise(pid: number, port: number): Promise<void> {
  await fs.mkdir(path.join(dataDir, "pg"), { recursive: true });
  await fs.writeFile(path.join(dataDir, "pg", "postmaster.pid"), `${pid}\n${dataDir}/pg\n0\n${port}\n`);
}

// Each test starts the CLI as a process (tsx compiles it first): seconds, more on a loaded machine.
describe("CLI start errors", { timeout: 60_000 }, () => {
  it("a second serve names the running Stepwise instead of a TypeError", async () => {
    await pretendAnotherStepwise(process.pid, 54987);
    const { code, output } = await runCli("serve", { PORT: "39123" });
    expect(code).not.toBe(0);
    expect(output).toContain(`Another Stepwise is running (pid ${process.pid}) on port 54987`);
    expect(output).not.toContain("Cannot read properties");
  });

  it("a worker without DATABASE_URL says the same", async () => {
    await pretendAnotherStepwise(process.pid, 54987);
    const { code, output } = await runCli("worker", {});
    expect(code).not.toBe(0);
    expect(output).toContain(`Another Stepwise is running (pid ${process.pid})`);
  });

  it("a taken web port is reported, exits non-zero and starts nothing", async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker!.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    const { code, output } = await runCli("serve", { PORT: String(port), HOST: "127.0.0.1" });
    expect(code).not.toBe(0);
    expect(output).toContain(`Port ${port} is in use; set PORT`);
    // Nothing was started: no database folder was initialised.
    expect(await fs.readdir(dataDir)).toEqual([]);
  });

  it("STEPWISE_TRUST_LOCAL=1 beyond loopback is refused before anything starts", async () => {
    blocker = createServer();
    await new Promise<void>((resolve) => blocker!.listen(0, "127.0.0.1", resolve));
    const port = (blocker.address() as { port: number }).port;
    await new Promise((resolve) => blocker!.close(resolve));
    blocker = undefined;
    const { code, output } = await runCli("serve", {
      PORT: String(port),
      HOST: "0.0.0.0",
      STEPWISE_TRUST_LOCAL: "1",
      STEPWISE_ACCESS_TOKEN: "",
    });
    expect(code).not.toBe(0);
    expect(output).toContain("STEPWISE_TRUST_LOCAL=1 only applies on loopback");
    expect(await fs.readdir(dataDir)).toEqual([]);
  });
});
