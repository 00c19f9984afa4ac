/**
 * `npm start`'s last step: Stepwise's server as this process's one child, in the foreground.
 * Plain JavaScript, like start.mjs, which imports it.
 */
import { spawn } from "node:child_process";
import os from "node:os";
import { setInterval, clearInterval } from "node:timers";

/**
 * Runs `command` with the terminal's streams and ends this process as it ends, with its exit
 * code. A SIGINT or SIGTERM sent to this process alone — a process manager stopping `npm start`,
 * `kill` of this process's pid — is passed on, so the server stops in order, its
 * embedded database last; left to the default, this process would die and the server run on
 * without it. Ctrl-C in a terminal reaches the server directly as well (one process group): it
 * takes the relayed copy, which comes within milliseconds, as the same press.
 */
export function runInForeground(command, args, options = {}) {
  const child = spawn(command, args, { stdio: "inherit", ...options });
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
  // npm runs this through `sh -c`, and a shell stopped by SIGTERM dies without passing it on: `kill`
  // of npm's pid reaches npm and the shell, not this process. Orphaned then (its parent gone, it
  // is adopted by another), this process stops the server as if it had been sent SIGTERM.
  const parent = process.ppid;
  const orphaned = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(orphaned);
    child.kill("SIGTERM");
  }, 500);
  orphaned.unref();
  child.on("error", (error) => {
    console.error(`[stepwise] could not start ${command}: ${error.message}`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0)));
  return child;
}
