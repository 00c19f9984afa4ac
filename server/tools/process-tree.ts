import fs from "node:fs";

/**
 * Ending every process of a command at once, and knowing when they are gone. A command runs in a
 * process group of its own whose first process starts a PID namespace (`unshare --pid`, or
 * bubblewrap's): the group holds the wrappers and the namespace's first process; the namespace
 * holds everything the command started, also what left the group (`setsid`, bubblewrap's
 * `--new-session`). SIGTERM is no way to stop it: the first process of a PID namespace ignores
 * every signal it has no handler for, so a script's shell would go on to its next command once the
 * current one died — `build && deploy` cancelled during the build would deploy.
 */

/**
 * The processes of group `pgid`, their descendants (bubblewrap's first process inside the sandbox
 * has a session of its own) and every process of a PID namespace one of those is in, by host pid.
 */
export function commandProcesses(pgid: number): number[] {
  const ownNamespace = pidNamespaceOf("self");
  const stats = new Map(listPids().map((pid) => [pid, readStat(pid)] as const));
  const all = [...stats.keys()];
  const members = all.filter((pid) => stats.get(pid)?.pgid === pgid);
  const children = new Map<number, number[]>();
  for (const [pid, stat] of stats) if (stat) children.set(stat.ppid, [...(children.get(stat.ppid) ?? []), pid]);
  for (let index = 0; index < members.length; index++)
    for (const child of children.get(members[index]!) ?? []) if (!members.includes(child)) members.push(child);
  const namespaces = new Set(
    members.map((pid) => pidNamespaceOf(String(pid))).filter((ns) => ns !== undefined && ns !== ownNamespace),
  );
  const inNamespaces =
    namespaces.size === 0 ? [] : all.filter((pid) => namespaces.has(pidNamespaceOf(String(pid)) ?? ""));
  return [...new Set([...members, ...inNamespaces])].sort((a, b) => a - b);
}

/**
 * SIGKILLs group `pgid` in one call (so no member runs another command after it), then each other
 * process found (see commandProcesses) (the kernel would empty them once their first process is
 * gone; this does not wait for that). Returns the pids it found alive just before.
 */
export function killCommand(pgid: number): number[] {
  const found = commandProcesses(pgid);
  signal(-pgid);
  for (const pid of found) signal(pid);
  return found;
}

/**
 * Resolves once none of `pids` is running any more (gone, or a zombie waiting to be reaped), or
 * after `timeoutMs` with those still running.
 */
export async function waitUntilGone(pids: number[], timeoutMs: number): Promise<number[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const running = pids.filter(isRunning);
    if (running.length === 0 || Date.now() >= deadline) return running;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Whether `pid` exists and is not a zombie. */
export function isRunning(pid: number): boolean {
  const stat = readStat(pid);
  return stat !== undefined && stat.state !== "Z" && stat.state !== "X";
}

function signal(target: number): void {
  try {
    process.kill(target, "SIGKILL");
  } catch {
    // Already gone.
  }
}

function listPids(): number[] {
  try {
    return fs
      .readdirSync("/proc")
      .filter((name) => /^\d+$/.test(name))
      .map(Number);
  } catch {
    return [];
  }
}

/** Fields of /proc/<pid>/stat after the command name (which may itself hold spaces and parentheses). */
function readStat(pid: number): { state: string; ppid: number; pgid: number } | undefined {
  try {
    const text = fs.readFileSync(`/proc/${pid}/stat`, "utf8");
    const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return { state: fields[0]!, ppid: Number(fields[1]), pgid: Number(fields[2]) };
  } catch {
    return undefined;
  }
}

function pidNamespaceOf(pid: string): string | undefined {
  try {
    return fs.readlinkSync(`/proc/${pid}/ns/pid`);
  } catch {
    return undefined;
  }
}
