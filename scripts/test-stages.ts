/**
 * The stages of `npm test` as child processes that may run side by side: each in its own
 * process group (so an interrupt stops it and everything it started), its output streamed a
 * line at a time behind the stage's label (so lines of stages running together stay readable),
 * and its wall time kept for the summary.
 */
import { type ChildProcess, spawn } from "node:child_process";

export interface StageResult {
  stage: string;
  ok: boolean;
  /** Wall time from start to exit, in milliseconds. */
  ms: number;
}

const running = new Set<ChildProcess>();
const finished: StageResult[] = [];
const failedStages: string[] = [];
let interrupted: NodeJS.Signals | undefined;
let labelWidth = 0;

export function stageResults(): readonly StageResult[] {
  return finished;
}

export function failedStageNames(): readonly string[] {
  return failedStages;
}

export function interruption(): NodeJS.Signals | undefined {
  return interrupted;
}

/** A stage that could not start (a missing browser, say) is a failed stage all the same. */
export function markFailed(stage: string): void {
  failedStages.push(stage);
}

/** Makes room for the longest label, so the streamed lines line up. */
export function reserveLabels(labels: string[]): void {
  labelWidth = Math.max(labelWidth, ...labels.map((label) => label.length));
}

/**
 * Runs one stage to its end. Resolves true when it exited 0 and nothing interrupted the run.
 * `label` prefixes each line the stage prints.
 */
export async function runStage(
  stage: string,
  label: string,
  command: string,
  args: string[],
  env: Record<string, string> = {},
): Promise<boolean> {
  if (interrupted) return false;
  const started = Date.now();
  const prefix = `${label.padEnd(labelWidth)} │ `;
  console.log(`▶ ${stage}: ${command} ${args.join(" ")}`);
  const child = spawn(command, args, {
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
    // Colours survive the pipe when the run itself is on a terminal.
    env: {
      ...process.env,
      NEXT_TELEMETRY_DISABLED: "1",
      ...(process.stdout.isTTY ? { FORCE_COLOR: "1" } : {}),
      ...env,
    },
  });
  running.add(child);
  streamLines(child.stdout, prefix, process.stdout);
  streamLines(child.stderr, prefix, process.stderr);
  const closed = new Promise<void>((resolve) => child.on("close", () => resolve()));
  const code = await new Promise<number | null>((resolve) => {
    child.on("exit", (exitCode) => resolve(exitCode));
    child.on("error", () => resolve(null));
  });
  // The last lines may still be in the pipes; a process the stage left behind could hold them
  // open for ever, so this waits a moment, not for the pipes to close.
  let wait: NodeJS.Timeout | undefined;
  await Promise.race([closed, new Promise((resolve) => (wait = setTimeout(resolve, 2000)))]);
  clearTimeout(wait);
  running.delete(child);
  if (interrupted && child.pid) await stopLeftovers(child.pid);
  const ok = code === 0 && !interrupted;
  const ms = Date.now() - started;
  finished.push({ stage, ok, ms });
  if (!ok) failedStages.push(interrupted ? `${stage} (interrupted)` : stage);
  console.log(`${ok ? "✓" : "✗"} ${stage} ${ok ? "passed" : "failed"} in ${seconds(ms)}`);
  return ok;
}

function streamLines(from: NodeJS.ReadableStream | null, prefix: string, to: NodeJS.WriteStream): void {
  if (!from) return;
  let partial = "";
  from.setEncoding("utf8");
  from.on("data", (chunk: string) => {
    const lines = (partial + chunk).split("\n");
    partial = lines.pop() ?? "";
    // Progress redraws (carriage returns) make no sense between other stages' lines.
    for (const line of lines) to.write(prefix + lastRedraw(line) + "\n");
  });
  from.on("end", () => {
    if (partial) to.write(prefix + partial + "\n");
  });
}

/** What a line that redraws itself (carriage returns) shows in the end. */
function lastRedraw(line: string): string {
  return (
    line
      .split("\r")
      .filter((part) => part !== "")
      .at(-1) ?? ""
  );
}

export function seconds(ms: number): string {
  return `${(ms / 1000).toFixed(0)} s`;
}

/**
 * Ctrl-C (or a SIGTERM to `npm test`): SIGINT to every running stage's whole process group, as
 * Ctrl-C on its own would be. Playwright then stops its web server (and the server its embedded
 * PostgreSQL) before it exits; on SIGTERM Playwright exits at once and leaves the server, which
 * runs in a process group of its own, behind. Stages not yet started never start.
 */
export function stopStagesOnInterrupt(): void {
  const onInterrupt = (signal: NodeJS.Signals) => {
    if (interrupted) return;
    interrupted = signal;
    console.log(`\n${signal}: stopping the running stages…`);
    for (const stage of running) {
      const pid = stage.pid;
      if (!pid) continue;
      signalGroup(pid, "SIGINT");
      // A stage that does not stop in time is stopped for good; nothing it started should outlive it.
      const deadline = setTimeout(() => signalGroup(pid, "SIGKILL"), 60_000);
      deadline.unref();
      stage.on("exit", () => clearTimeout(deadline));
    }
  };
  process.on("SIGINT", () => onInterrupt("SIGINT"));
  process.on("SIGTERM", () => onInterrupt("SIGTERM"));
}

/**
 * After an interrupt, what a stopped stage left in its process group (a shell's background job
 * ignores SIGINT) gets a SIGTERM, then a SIGKILL if it is still there 5 s later.
 */
async function stopLeftovers(pid: number): Promise<void> {
  if (!groupAlive(pid)) return;
  signalGroup(pid, "SIGTERM");
  for (let waited = 0; waited < 5000 && groupAlive(pid); waited += 100) {
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  signalGroup(pid, "SIGKILL");
}

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}
