import { execFileSync } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { AppError } from "../errors";
import { builtinRegistry } from "./registry";
import { SHELL_LOG_LINE_LIMIT, SHELL_OUTPUT_LIMIT, ShellCommandError, shellEnvironment, shellTool } from "./shell";
import { createTempWorkspace, createToolContext, rejectionOf, removeTempWorkspace, runTool } from "./tool-test-support";
import { requiresApprovalByDefault } from "./types";
import { sandboxAvailable } from "./sandbox";

let root: string;

beforeAll(async () => {
  root = await createTempWorkspace({ "a.txt": "alpha\n", "sub/b.txt": "beta\n" });
});

afterAll(async () => {
  await removeTempWorkspace(root);
});

const shell = (input: Record<string, unknown>, context = createToolContext(root)) => runTool(shellTool, input, context);

function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Shell text writing the pid of the process running it, as this process sees it, to `file`. */
const hostPid = (file: string) => `read -r p _ < /proc/self/stat; echo $p >> ${file}`;

async function waitFor(condition: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error("condition not met in time");
    await delay(25);
  }
}

describe("shell", () => {
  it("runs a command in the workspace and returns exit code, stdout and stderr", async () => {
    const result = await shell({ command: "cat a.txt; echo oops >&2; pwd" });
    expect(result).toEqual({
      exitCode: 0,
      signal: null,
      stdout: `alpha\n${root}\n`,
      stderr: "oops\n",
      truncated: false,
    });
  });

  it("runs in a sub-directory and refuses one outside the workspace", async () => {
    expect((await shell({ command: "cat b.txt", cwd: "sub" })).stdout).toBe("beta\n");
    const error = await rejectionOf(shell({ command: "ls", cwd: ".." }));
    expect((error as AppError).code).toBe("forbidden");
    const notDir = await rejectionOf(shell({ command: "ls", cwd: "a.txt" }));
    expect((notDir as AppError).code).toBe("invalid_input");
  });

  it("streams stdout and stderr lines to the step log", async () => {
    const context = createToolContext(root);
    await shell({ command: "printf 'one\\ntwo\\n'; echo warn >&2; printf 'no newline'" }, context);
    expect(context.logs).toEqual(
      expect.arrayContaining([
        { message: "one", level: "info" },
        { message: "two", level: "info" },
        { message: "warn", level: "warn" },
        { message: "no newline", level: "info" },
      ]),
    );
    expect(context.logs).toHaveLength(4);
  });

  it("fails the step on a non-zero exit, with the last output lines in the message", async () => {
    const error = await rejectionOf(shell({ command: "echo bad thing >&2; exit 3" }));
    expect(error).toBeInstanceOf(ShellCommandError);
    expect(error.message).toBe("The command exited with code 3:\nbad thing");
    expect((error as ShellCommandError).result.exitCode).toBe(3);
  });

  it("completes with the exit code when failure is allowed", async () => {
    const result = await shell({ command: "exit 7", allowFailure: true });
    expect(result.exitCode).toBe(7);
  });

  it("caps long output, keeping its start and end", async () => {
    const context = createToolContext(root);
    const result = await shell({ command: "seq 1 100000" }, context);
    expect(result.truncated).toBe(true);
    expect(result.stdout.length).toBeLessThan(SHELL_OUTPUT_LIMIT + 100);
    expect(result.stdout.startsWith("1\n2\n3\n")).toBe(true);
    expect(result.stdout.endsWith("99999\n100000\n")).toBe(true);
    expect(result.stdout).toMatch(/… \[\d+ characters omitted\] …/);
    expect(context.logs).toHaveLength(SHELL_LOG_LINE_LIMIT + 1);
    expect(context.logs.at(-1)!.message).toContain("not streamed");
  });

  it("kills the whole process group when aborted", async () => {
    const pidFile = path.join(root, "pids.txt");
    const controller = new AbortController();
    // Pids as this process sees them (/proc/self/stat), not the command's own PID namespace's $$.
    const running = shell(
      { command: `(${hostPid("pids.txt")}; exec sleep 30) & ${hostPid("pids.txt")}; wait` },
      createToolContext(root, controller.signal),
    );
    await waitFor(async () => (await fs.readFile(pidFile, "utf8").catch(() => "")).trim().split("\n").length === 2);
    const pids = (await fs.readFile(pidFile, "utf8")).trim().split("\n").map(Number);
    expect(pids.every(isAlive)).toBe(true);
    controller.abort(new Error("Timed out after 1s"));
    const error = await rejectionOf(running);
    expect(error.message).toBe("Timed out after 1s");
    await waitFor(() => !pids.some(isAlive));
    await fs.rm(pidFile);
  });

  it("ends a child that left the process group (setsid) with the step: on abort, and when the shell exits", async () => {
    const pidFile = path.join(root, "setsid.pid");
    const readPid = async () => Number((await fs.readFile(pidFile, "utf8").catch(() => "")).trim());
    const controller = new AbortController();
    const running = shell(
      { command: `setsid bash -c '${hostPid("setsid.pid")}; exec sleep 1000' & wait` },
      createToolContext(root, controller.signal),
    );
    await waitFor(async () => (await readPid()) > 0);
    const cancelled = await readPid();
    expect(isAlive(cancelled)).toBe(true);
    controller.abort(new Error("Run cancelled"));
    expect((await rejectionOf(running)).message).toBe("Run cancelled");
    await waitFor(() => !isAlive(cancelled));
    await fs.rm(pidFile);

    // The shell exits at once, leaving the setsid child behind: it ends with the step all the same.
    await shell({
      command: `setsid bash -c '${hostPid("setsid.pid")}; exec sleep 1000' & until [ -s setsid.pid ]; do sleep 0.05; done`,
    });
    const left = await readPid();
    expect(left).toBeGreaterThan(0);
    await waitFor(() => !isAlive(left));
    await fs.rm(pidFile);
  });

  it("does not wait for a background child that keeps the output open", async () => {
    // The child would hold the output open for ten minutes; the step ends with its shell, long
    // before that (the test's own timeout is the backstop), however slow the machine.
    const started = Date.now();
    const result = await shell({ command: "sleep 600 & echo started" });
    expect(result.stdout).toBe("started\n");
    expect(Date.now() - started).toBeLessThan(300_000);
  });

  it("refuses to start when already aborted", async () => {
    const controller = new AbortController();
    controller.abort(new Error("cancelled"));
    const error = await rejectionOf(
      shell({ command: "touch should-not-exist" }, createToolContext(root, controller.signal)),
    );
    expect(error.message).toBe("cancelled");
    await expect(fs.access(path.join(root, "should-not-exist"))).rejects.toThrow();
  });

  it("rejects an empty command at validation time", () => {
    expect(shellTool.inputSchema.safeParse({ command: "   " }).success).toBe(false);
  });
});

describe("shell environment", () => {
  it("drops startup hooks, exported functions, relative PATH entries and Stepwise secrets", () => {
    const env = shellEnvironment({
      PATH: `/usr/bin:.:bin:/bin:`,
      HOME: "/root",
      BASH_ENV: "/tmp/evil.sh",
      ENV: "/tmp/evil.sh",
      "BASH_FUNC_ls%%": "() { rm -rf x; }",
      DATABASE_URL: "postgres://u:p@h/db",
      OPENAI_API_KEY: "sk-1",
      GITHUB_TOKEN: "t",
      STEPWISE_ACCESS_TOKEN: "a",
    });
    expect(env).toEqual({ PATH: "/usr/bin:/bin", HOME: "/root", GIT_TERMINAL_PROMPT: "0" });
  });

  it("does not source BASH_ENV even when the worker has it set", async () => {
    const hook = path.join(root, "hook.sh");
    await fs.writeFile(hook, "echo sourced\n");
    process.env.BASH_ENV = hook;
    try {
      expect((await shell({ command: "echo ran" })).stdout).toBe("ran\n");
    } finally {
      delete process.env.BASH_ENV;
    }
  });
});

describe("shell approval default", () => {
  it("is decided per command by the parser", () => {
    // Read-only commands run ungated only where the sandbox can hold them to it.
    expect(requiresApprovalByDefault(shellTool, { command: "ls -la" })).toBe(!sandboxAvailable());
    expect(requiresApprovalByDefault(shellTool, { command: "git status && git diff" })).toBe(!sandboxAvailable());
    expect(requiresApprovalByDefault(shellTool, { command: "rm -rf build" })).toBe(true);
    expect(requiresApprovalByDefault(shellTool, { command: "ls > files.txt" })).toBe(true);
    // Unknown at plan time: a reference to another step's output.
    expect(requiresApprovalByDefault(shellTool, { command: "$step_1" })).toBe(true);
    expect(requiresApprovalByDefault(shellTool, {})).toBe(true);
    expect(requiresApprovalByDefault(shellTool, null)).toBe(true);
  });

  it("is registered as a built-in", () => {
    expect(builtinRegistry.get("shell")).toBe(shellTool);
  });

  it("a read-only command really leaves the workspace unchanged", async () => {
    // The `..` line is the temporary directory's, which tests running alongside change.
    const listing = () =>
      execFileSync("ls", ["-laR"], { cwd: root, encoding: "utf8" })
        .split("\n")
        .filter((line) => !line.endsWith(" .."))
        .join("\n");
    const before = listing();
    await shell({ command: "ls -la; cat a.txt | wc -l; find . -name '*.txt'" });
    expect(listing()).toBe(before);
  });
});
