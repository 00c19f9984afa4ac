/**
 * A web process for scale-out tests: the API routes behind the real door (tests/door-http-server.ts:
 * `/api/mcp`, seed 001's `/api/plan…` with its SSE, `/api/ops`, the live socket) on its own app
 * context over DATABASE_URL, with no worker — the steps run elsewhere, as behind a proxy in front
 * of several web processes. Its own process, so nothing it holds in memory is shared with another.
 *
 *   DATABASE_URL=… STEPWISE_WORKSPACE=… STEPWISE_AGENT_TOKEN=… [STEPWISE_ACCESS_TOKEN=…] \
 *     node --import tsx tests/web-process.ts
 *
 * It prints `ready <url>` once it listens; SIGTERM stops it as `serve` stops (connections closed,
 * then the app). Tests start it with `spawnWebProcess`.
 */
import { spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { createAppContext } from "../server/app-context";
import { startApiServer } from "./door-http-server";

const READY_PREFIX = "ready ";
const thisFile = fileURLToPath(import.meta.url);
const projectRoot = path.resolve(path.dirname(thisFile), "..");

export interface WebProcess {
  url: string;
  pid: number;
  /** SIGTERM, then waits for the process to exit. */
  stop(): Promise<void>;
  /** Everything it wrote, for a failing test's message. */
  output(): string;
}

export function spawnWebProcess(options: {
  databaseUrl: string;
  workspace: string;
  agentToken: string;
  /** The person's access token (else the door trusts the local caller, as in the other tests). */
  accessToken?: string;
  /** Its data folder (the decision-link key); processes given the same one share the key. */
  dataDir?: string;
  readyTimeoutMs?: number;
}): Promise<WebProcess> {
  const child = spawn(process.execPath, ["--import", "tsx", thisFile], {
    cwd: projectRoot,
    env: {
      ...process.env,
      DATABASE_URL: options.databaseUrl,
      STEPWISE_WORKSPACE: options.workspace,
      STEPWISE_AGENT_TOKEN: options.agentToken,
      STEPWISE_ACCESS_TOKEN: options.accessToken ?? "",
      ...(options.dataDir && { STEPWISE_DATA_DIR: options.dataDir }),
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill("SIGKILL");
      reject(new Error(`web process not ready in time:\n${output}`));
    }, options.readyTimeoutMs ?? 120_000);
    child.stderr!.on("data", (chunk: Buffer) => (output += chunk.toString()));
    child.stdout!.on("data", (chunk: Buffer) => {
      output += chunk.toString();
      const line = output.split("\n").find((text) => text.startsWith(READY_PREFIX));
      if (!line) return;
      clearTimeout(timer);
      resolve({
        url: line.slice(READY_PREFIX.length).trim(),
        pid: child.pid!,
        async stop() {
          if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
          await exited;
        },
        output: () => output,
      });
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`web process exited (${code}) before it was ready:\n${output}`));
    });
  });
}

async function main(): Promise<void> {
  const app = await createAppContext({
    databaseUrl: process.env.DATABASE_URL!,
    workspaceRoot: process.env.STEPWISE_WORKSPACE!,
    worker: false,
  });
  const api = await startApiServer(app, {
    agentToken: process.env.STEPWISE_AGENT_TOKEN!,
    ...(process.env.STEPWISE_ACCESS_TOKEN && { accessToken: process.env.STEPWISE_ACCESS_TOKEN }),
  });
  process.once("SIGTERM", () => {
    void (async () => {
      await api.close();
      await app.close();
      process.exit(0);
    })();
  });
  process.stdout.write(`${READY_PREFIX}${api.url}\n`);
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  main().catch((error: unknown) => {
    process.stderr.write(`${String((error as Error)?.stack ?? error)}\n`);
    process.exit(1);
  });
}
