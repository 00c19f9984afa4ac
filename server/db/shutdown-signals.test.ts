import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const embedded = fileURLToPath(new URL("./embedded.ts", import.meta.url));

/**
 * Runs `body` in a fresh Node process that has loaded embedded.ts (and so its early exits on a
 * signal, as `stepwise serve` has), and returns what it printed and its exit code.
 */
function inChild(body: string) {
  const script = `const { takeOverShutdownSignals } = await import(${JSON.stringify(embedded)});\n${body}`;
  const child = spawnSync(process.execPath, ["--import", "tsx", "--input-type=module", "-e", script], {
    encoding: "utf8",
  });
  return { code: child.status, output: child.stdout.trim(), errors: child.stderr };
}

describe("takeOverShutdownSignals", () => {
  it("keeps a Ctrl-C that arrived just before the handover: it reaches the new handler", () => {
    // The signal is queued for the watcher in place when it arrives (here, before the handover
    // starts); the handler must still see it. Two turns of the event loop later it would have.
    const { code, output, errors } = inChild(`
      process.kill(process.pid, "SIGINT");
      takeOverShutdownSignals((signal) => { console.log("handled " + signal); process.exit(0); });
      setImmediate(() => setImmediate(() => { console.log("lost"); process.exit(3); }));
    `);
    expect(errors).toBe("");
    expect(output).toBe("handled SIGINT");
    expect(code).toBe(0);
  });

  it("hands SIGTERM over too, and leaves no early exit listening", () => {
    const { code, output } = inChild(`
      takeOverShutdownSignals((signal) => {
        console.log(signal + " " + process.listenerCount("SIGINT") + " " + process.listenerCount("SIGTERM") + " " + process.listenerCount("SIGHUP"));
        process.exit(0);
      });
      process.kill(process.pid, "SIGTERM");
      setImmediate(() => setImmediate(() => { console.log("lost"); process.exit(3); }));
    `);
    // One listener each (this handler's), none left for SIGHUP, which has its default action back.
    expect(output).toBe("SIGTERM 1 1 0");
    expect(code).toBe(0);
  });

  it("before the handover, a signal still ends the process through its exit hooks (a started database is stopped)", () => {
    const { code, output } = inChild(`
      process.on("exit", (exitCode) => console.log("exit hook " + exitCode));
      process.kill(process.pid, "SIGTERM");
      setTimeout(() => { console.log("ignored"); process.exit(3); }, 5000);
    `);
    expect(output).toBe("exit hook 143");
    expect(code).toBe(143);
  });
});
