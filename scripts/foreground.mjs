/**
 * `npm start`'s last step: Stepwise's server as this process's one child, in the foreground.
 * Plain JavaScript, like start.mjs, which imports it.
 */
import { spawn } from "node:child_process";
import os from "node:os";

/**
 * Runs `command` with the terminal's streams and ends this process as it ends, with its exit
 * code. A SIGINT or SIGTERM sent to this process alone — a process manager stopping `npm start`,
 * `kill` of npm's pid (npm relays it here) — is passed on, so the server stops in order, its
 * embedded database last; left to the default, this process would die and the server run on
 * without it. Ctrl-C in a terminal reaches the server directly as well (one process group): it
 * takes the relayed copy, which comes within milliseconds, as the same press.
 */
export function runInForeground(command, args, options = {}) {
  const child = spawn(command, args, { stdio: "inherit", ...options });
  for (const signal of ["SIGINT", "SIGTERM"]) process.on(signal, () => child.kill(signal));
  child.on("error", (error) => {
    console.error(`[stepwise] could not start ${command}: ${error.message}`);
    process.exit(1);
  });
  child.on("exit", (code, signal) => process.exit(code ?? 128 + (os.constants.signals[signal] ?? 0)));
  return child;
}
