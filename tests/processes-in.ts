import fs from "node:fs";
import { isRunning } from "../server/tools/process-tree";

/**
 * Host pids of the running processes whose working directory is inside `dir` — a command's, or a
 * sandboxed one's (bubblewrap binds the workspace at its own path, so the link reads the same).
 */
export function processesIn(dir: string): number[] {
  const found: number[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const cwd = fs.readlinkSync(`/proc/${name}/cwd`);
      if ((cwd === dir || cwd.startsWith(`${dir}/`)) && isRunning(Number(name))) found.push(Number(name));
    } catch {
      // Gone, or not ours to read.
    }
  }
  return found;
}
