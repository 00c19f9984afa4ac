import fs from "node:fs/promises";
import net from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { sandboxAvailable } from "./sandbox";
import { runShell, shellTool } from "./shell";
import { createTempWorkspace, createToolContext, removeTempWorkspace, runTool } from "./tool-test-support";

/**
 * The sandbox holds whatever the parser lets through: these commands are run confined exactly as
 * an ungated read-only step is, but they are ones a wrong parser might let through — each tries
 * to write, reach the network, read the server's secrets or the host's files, or outlive its limit.
 */

let workspace: string;
let listener: net.Server;
let port: number;
const connections: string[] = [];

beforeAll(async () => {
  workspace = await createTempWorkspace({ "README.md": "# readme\n" });
  listener = net.createServer((socket) => {
    connections.push("connected");
    socket.end();
  });
  await new Promise<void>((resolve) => listener.listen(0, "127.0.0.1", resolve));
  port = (listener.address() as net.AddressInfo).port;
  process.env.STEPWISE_TEST_SERVER_SECRET = "sk-server-secret-value";
});

afterAll(async () => {
  delete process.env.STEPWISE_TEST_SERVER_SECRET;
  listener.close();
  await removeTempWorkspace(workspace);
});

const confined = (command: string) => runShell(command, workspace, createToolContext(workspace), {}, { workspace });

it("is available where the tests run in CI (bubblewrap is installed by .ci/run)", () => {
  if (process.env.CI) expect(sandboxAvailable()).toBe(true);
});

describe.runIf(sandboxAvailable())("the read-only sandbox", () => {
  it("lets a read-only command read the workspace", async () => {
    const result = await runTool(shellTool, { command: "cat README.md && ls" }, createToolContext(workspace));
    expect(result.stdout).toContain("# readme");
  });

  it("refuses every write to the workspace, even by a command the parser would have gated", async () => {
    for (const command of [
      "touch new.txt",
      "echo x > README.md",
      "rm README.md",
      "mkdir d",
      "sort -o README.md README.md",
    ]) {
      const result = await confined(command);
      expect(result.exitCode, command).not.toBe(0);
    }
    expect(await fs.readFile(path.join(workspace, "README.md"), "utf8")).toBe("# readme\n");
    expect((await fs.readdir(workspace)).sort()).toEqual(["README.md"]);
  });

  it("has no network: a listening local port cannot be reached", async () => {
    const result = await confined(`echo hi > /dev/tcp/127.0.0.1/${port}`);
    expect(result.exitCode).not.toBe(0);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(connections).toEqual([]);
  });

  it("sees none of the server's environment, processes or the host's home", async () => {
    const result = await confined(
      "env; cat /proc/1/environ 2>&1; cat /proc/$PPID/environ 2>&1; ls /proc; ls /root 2>&1; ls $HOME 2>&1; true",
    );
    expect(result.stdout).not.toContain("sk-server-secret-value");
    expect(result.stdout).not.toContain("DATABASE_URL");
    // Its own PID namespace: only the sandbox's few processes are listed.
    const pids = result.stdout.split("\n").filter((line) => /^\d+$/.test(line));
    expect(pids.length).toBeLessThan(10);
    expect(result.stdout).toMatch(/ls: cannot access '\/root'/);
  });

  it("a private /tmp: nothing written there reaches the host", async () => {
    const marker = `stepwise-sandbox-${process.pid}`;
    await confined(`echo x > /tmp/${marker}`);
    await expect(fs.stat(path.join("/tmp", marker))).rejects.toThrow();
  });

  it("is killed at its time limit", async () => {
    const controller = new AbortController();
    const started = runShell("sleep 30", workspace, createToolContext(workspace, controller.signal), {}, { workspace });
    setTimeout(() => controller.abort(new Error("timed out")), 300);
    await expect(started).rejects.toThrow("timed out");
  });
});

describe("without a sandbox", () => {
  it("every shell command needs approval, read-only or not", () => {
    const before = process.env.STEPWISE_SANDBOX;
    process.env.STEPWISE_SANDBOX = "off";
    try {
      expect(shellTool.requiresApprovalFor!({ command: "ls" })).toBe(true);
      expect(shellTool.requiresApprovalFor!({ command: "cat README.md" })).toBe(true);
    } finally {
      if (before === undefined) delete process.env.STEPWISE_SANDBOX;
      else process.env.STEPWISE_SANDBOX = before;
    }
    if (sandboxAvailable()) expect(shellTool.requiresApprovalFor!({ command: "ls" })).toBe(false);
  });
});
