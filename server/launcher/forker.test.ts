import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { describe, expect, it } from "vitest";
import { launchForOutput } from "./launcher";

/**
 * `launchForOutput` starts its programs from the forker (forker.ts), not from this process, and
 * gives back what they wrote, cut where it was asked, ended when asked, and never waits for ever
 * on a forker that died.
 */

const sh = (script: string, output = { stdoutBytes: 1_000, stderrBytes: 1_000, closeAfterBytes: 1_000_000 }) =>
  launchForOutput(
    { kind: "helper", argv: ["/bin/sh", "-c", script], why: "the forker's test" },
    { env: { PATH: "/usr/bin:/bin" }, output },
  );

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return fs.readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0] !== "Z";
  } catch {
    return false;
  }
};

describe("the forker", () => {
  it("runs the program in a process of its own and gives back its output and exit code", async () => {
    const result = await sh('echo "parent $PPID"; echo oops >&2; exit 3');
    expect(result.exitCode).toBe(3);
    expect(result.stderr.toString()).toBe("oops\n");
    const parent = Number(/parent (\d+)/.exec(result.stdout.toString())![1]);
    // Forked by the forker: this process's event loop never waited for the fork.
    expect(parent).not.toBe(process.pid);
    expect(fs.readFileSync(`/proc/${parent}/cmdline`, "utf8").split("\0")[0]).toBe(process.execPath);
    // One forker serves every launch.
    const again = await sh('echo "parent $PPID"');
    expect(again.stdout.toString()).toBe(`parent ${parent}\n`);
  });

  it("keeps what it was asked to keep, and closes the pipe of a program that writes without end", async () => {
    const endless = await launchForOutput(
      { kind: "helper", argv: ["/usr/bin/yes"], why: "the forker's test" },
      { env: {}, output: { stdoutBytes: 10, stderrBytes: false, closeAfterBytes: 200_000 } },
    );
    expect(endless.stdout.toString()).toBe("y\ny\ny\ny\ny\n");
    expect(endless.stdoutTruncated).toBe(true);
    // It ended on the closed pipe (EPIPE: Node, and so its programs, ignore SIGPIPE), not by itself.
    expect(endless.exitCode).not.toBe(0);
    const whole = await sh("printf 12345");
    expect(whole.stdoutTruncated).toBe(false);
  });

  it("ends the program when the caller's signal aborts, and rejects with its reason", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-forker-"));
    const pidFile = path.join(dir, "pid");
    const controller = new AbortController();
    const running = launchForOutput(
      { kind: "helper", argv: ["/bin/sh", "-c", `echo $$ > ${pidFile}; exec sleep 60`], why: "the forker's test" },
      {
        env: { PATH: "/usr/bin:/bin" },
        signal: controller.signal,
        output: { stdoutBytes: 0, stderrBytes: 0, closeAfterBytes: 1 },
      },
    );
    await expect.poll(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim() !== "").toBe(true);
    const pid = Number(fs.readFileSync(pidFile, "utf8"));
    controller.abort(new Error("stopped by the test"));
    await expect(running).rejects.toThrow("stopped by the test");
    await expect.poll(() => alive(pid), { timeout: 10_000 }).toBe(false);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("rejects what was running when the forker dies, and starts a new one for the next program", async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-forker-"));
    const pidFile = path.join(dir, "pids");
    const running = sh(`echo "$PPID" > ${pidFile}; exec sleep 60`);
    await expect.poll(() => fs.existsSync(pidFile) && fs.readFileSync(pidFile, "utf8").trim() !== "").toBe(true);
    const forker = Number(fs.readFileSync(pidFile, "utf8"));
    process.kill(forker, "SIGKILL");
    await expect(running).rejects.toThrow(/The forker ended/);
    const next = await sh('echo "parent $PPID"');
    expect(next.exitCode).toBe(0);
    expect(next.stdout.toString()).not.toBe(`parent ${forker}\n`);
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it("leaves with the process that started it", async () => {
    // A process that launched one program and was then killed: its forker exits too.
    const { spawnSync } = await import("node:child_process");
    const module = path.join(__dirname, "launcher.ts");
    const script = `import(${JSON.stringify(module)}).then(async (m) => {
      const out = await m.launchForOutput({ kind: "helper", argv: ["/bin/sh", "-c", "echo $PPID"], why: "test" },
        { env: {}, output: { stdoutBytes: 100, stderrBytes: false, closeAfterBytes: 1000 } });
      console.log("forker " + out.stdout.toString().trim());
      process.kill(process.pid, "SIGKILL");
    });`;
    const child = spawnSync(process.execPath, ["--import", "tsx", "-e", script], { encoding: "utf8" });
    const forker = Number(/forker (\d+)/.exec(child.stdout)?.[1]);
    expect(forker, child.stderr).toBeGreaterThan(0);
    await expect.poll(() => alive(forker), { timeout: 10_000 }).toBe(false);
  });
});
