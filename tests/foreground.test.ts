import { spawn } from "node:child_process";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { processAlive } from "../server/cli/connection-file";

/**
 * `npm start`'s foreground step (scripts/foreground.mjs), with real processes and signals: a stop
 * sent to the starting process alone — what a process manager, or `kill` of npm's pid, sends — must
 * reach the server, or the server runs on with nobody to stop it (and its embedded database with it).
 */
const made: string[] = [];
const started: number[] = [];
afterEach(async () => {
  // Whatever a failing case left running goes too.
  for (const pid of started.splice(0)) if (processAlive(pid)) process.kill(pid, "SIGKILL");
  for (const dir of made.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

const foreground = path.resolve("scripts/foreground.mjs");

async function starter(): Promise<{ dir: string; parent: string }> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-foreground-"));
  made.push(dir);
  // The "server": says it is up, and on SIGTERM or SIGINT says which and stops in order (exit 0).
  await fs.writeFile(
    path.join(dir, "server.mjs"),
    `for (const signal of ["SIGTERM", "SIGINT"]) process.on(signal, () => { console.log("server got " + signal + " as " + process.pid); setTimeout(() => process.exit(0), 100); });
     console.log("server up as " + process.pid);
     setInterval(() => undefined, 1000);`,
  );
  const parent = path.join(dir, "start.mjs");
  await fs.writeFile(
    parent,
    `import { runInForeground } from ${JSON.stringify(foreground)};
     runInForeground(process.execPath, [${JSON.stringify(path.join(dir, "server.mjs"))}]);`,
  );
  return { dir, parent };
}

describe("npm start's foreground step", () => {
  it.each(["SIGTERM", "SIGINT"] as const)(
    "passes %s sent to it alone on to the server, and exits as the server does",
    async (signal) => {
      const { parent } = await starter();
      const child = spawn(process.execPath, [parent], { stdio: ["ignore", "pipe", "inherit"] });
      started.push(child.pid!);
      let output = "";
      child.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
      const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
      await expect.poll(() => output, { timeout: 20_000 }).toMatch(/server up as \d+/);
      const server = Number(/server up as (\d+)/.exec(output)![1]);
      started.push(server);

      process.kill(child.pid!, signal);

      const deadline = new Promise<string>((resolve) =>
        setTimeout(() => resolve(`still running 20 s after ${signal}`), 20_000).unref(),
      );
      expect(await Promise.race([exited, deadline])).toBe(0);
      expect(output).toContain(`server got ${signal} as ${server}`);
      expect(processAlive(server)).toBe(false);
    },
  );
  it("stops the server when npm and its shell are stopped and it is left orphaned", async () => {
    const { parent } = await starter();
    // As npm runs a script: through `sh -c`, which dies on SIGTERM without passing it on.
    const shell = spawn("sh", ["-c", `${JSON.stringify(process.execPath)} ${JSON.stringify(parent)}; true`], {
      stdio: ["ignore", "pipe", "inherit"],
    });
    started.push(shell.pid!);
    let output = "";
    shell.stdout.on("data", (chunk: Buffer) => (output += chunk.toString()));
    await expect.poll(() => output, { timeout: 20_000 }).toMatch(/server up as \d+/);
    const server = Number(/server up as (\d+)/.exec(output)![1]);
    started.push(server);

    process.kill(shell.pid!, "SIGTERM");

    await expect.poll(() => output, { timeout: 20_000 }).toContain(`server got SIGTERM as ${server}`);
    await expect.poll(() => processAlive(server), { timeout: 20_000 }).toBe(false);
  });
});
