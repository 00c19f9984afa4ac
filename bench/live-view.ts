/**
 * `npm run bench:live [-- --viewers 1,20] [-- --steps 1000] [-- --only ws,sse,rendered]`: how fast a run's events reach the
 * people watching it, measured against the real server on an embedded PostgreSQL
 * (e2e/serve-for-tests.ts) with a 1,000-step run (10 layers of 100 `echo` steps behind one gate):
 *
 *   - commit → subscriber: N clients follow the run's events the way the live view does — the tRPC
 *     subscription over the WebSocket at /api/live (`ws`), and, as a second figure, over HTTP
 *     (SSE, tRPC's HTTP subscription); each event's delay from its commit timestamp to its arrival;
 *   - commit → rendered: N Chromium pages show the live view; each event's delay from its commit
 *     timestamp to the React commit that rendered it (the page's render probe), plus every long
 *     task (> 50 ms, PerformanceObserver 'longtask') while the run streams.
 *
 * Needs a production build first: `STEPWISE_NEXT_DIST_DIR=.next-bench npx next build`, then
 * `STEPWISE_NEXT_DIST_DIR=.next-bench npm run bench:live`. Prints the figures and writes
 * bench/results/live-view.json. Nothing here is a test: it asserts nothing about time.
 */
import { spawn } from "node:child_process";
import { setMaxListeners } from "node:events";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { benchAuth, BENCH_TOKEN, signedInContext } from "./signed-in";
import { chromium, type BrowserContext, type Page } from "@playwright/test";
import WebSocket from "ws";
import { LIVE_SOCKET_PATH } from "../components/live/relay-protocol";

function option(name: string, fallback: string): string {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? process.argv[index + 1]! : fallback;
}

const VIEWERS = option("viewers", "1,20").split(",").map(Number);
const STEPS = Number(option("steps", "1000"));
const PORT = Number(option("port", "3292"));
/** `--only ws,sse,rendered` measures some of the three paths. */
const ONLY = option("only", "ws,sse,rendered").split(",");
const BASE = `http://127.0.0.1:${PORT}`;

/** W1's shape (layers of 100, two dependencies on the previous layer, mulberry32 seeded 42) behind one gate. */
function gatedLayeredPlan(size: number) {
  let seed = 42;
  const rand = () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  const width = 100;
  const layers = Math.ceil(size / width);
  const steps: Record<string, unknown>[] = [
    { id: "gate", description: "Start when approved", tool: "echo", args: { value: 0 }, approvalRequired: true },
  ];
  for (let layer = 0; layer < layers; layer++) {
    for (let i = 0; i < width; i++) {
      const dependsOn: string[] = [];
      if (layer === 0) dependsOn.push("gate");
      else
        while (dependsOn.length < 2) {
          const pick = `s_${layer - 1}_${Math.floor(rand() * width)}`;
          if (!dependsOn.includes(pick)) dependsOn.push(pick);
        }
      steps.push({
        id: `s_${layer}_${i}`,
        description: `Layer ${layer} step ${i}`,
        tool: "echo",
        args: { value: i },
        dependsOn,
      });
    }
  }
  return { goal: `Live view benchmark (${size} steps)`, steps };
}

async function call<T>(procedure: string, input: unknown): Promise<T> {
  const response = await fetch(`${BASE}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...benchAuth },
    body: JSON.stringify({ json: input }),
  });
  const body = (await response.json()) as { result?: { data: { json: T } }; error?: unknown };
  if (!body.result) throw new Error(`${procedure}: ${JSON.stringify(body.error)}`);
  return body.result.data.json;
}

async function query<T>(procedure: string, input: unknown): Promise<T> {
  const response = await fetch(
    `${BASE}/api/trpc/${procedure}?input=${encodeURIComponent(JSON.stringify({ json: input }))}`,
    { headers: benchAuth },
  );
  const body = (await response.json()) as { result: { data: { json: T } } };
  return body.result.data.json;
}

/** A plan waiting at its gate: its run id and the sequence number to stream from. */
async function preparedRun(): Promise<{ runId: string; lastSeq: number; total: number }> {
  const plan = gatedLayeredPlan(STEPS);
  const created = await call<{ id: string; version: number }>("plans.createFromJson", {
    planJson: JSON.stringify(plan),
  });
  const { runId } = await call<{ runId: string }>("plans.approve", {
    planId: created.id,
    version: created.version,
    maxParallel: 256,
  });
  for (;;) {
    const run = await query<{ lastSeq: number; steps: { status: string }[] }>("runs.get", { runId });
    if (run.steps[0]?.status === "awaiting_approval") return { runId, lastSeq: run.lastSeq, total: plan.steps.length };
    await delay(100);
  }
}

/** One SSE subscriber: the delay of every event from its commit timestamp to its arrival here. */
async function subscribe(runId: string, fromSeq: number, signal: AbortSignal): Promise<number[]> {
  const input = encodeURIComponent(JSON.stringify({ json: { runId, lastEventId: String(fromSeq) } }));
  const response = await fetch(`${BASE}/api/trpc/runs.events?input=${input}`, {
    headers: { accept: "text/event-stream", ...benchAuth },
    signal,
  });
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  const delays: number[] = [];
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return delays;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const message = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = message
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trim())
        .join("");
      if (!data) continue;
      const parsed = JSON.parse(data) as { json?: { createdAt?: string; type?: string } };
      const event = parsed.json;
      if (!event?.createdAt) continue;
      delays.push(Date.now() - Date.parse(event.createdAt));
      if (event.type === "run.completed" || event.type === "run.failed") {
        await reader.cancel();
        return delays;
      }
    }
  }
}

/**
 * One subscriber on the live socket, as the browser's relay holds it: the tRPC subscription
 * `runs.events` over the WebSocket (Origin ours, as the door requires of live connections).
 */
async function subscribeOverSocket(runId: string, fromSeq: number, signal: AbortSignal): Promise<number[]> {
  const socket = new WebSocket(`ws://127.0.0.1:${PORT}${LIVE_SOCKET_PATH}`, {
    headers: { origin: BASE, ...benchAuth },
  });
  const delays: number[] = [];
  return new Promise<number[]>((resolve, reject) => {
    const finish = () => {
      socket.close();
      resolve(delays);
    };
    signal.addEventListener("abort", finish, { once: true });
    socket.on("error", reject);
    socket.on("open", () => {
      socket.send(
        JSON.stringify({
          id: 1,
          method: "subscription",
          params: { path: "runs.events", input: { json: { runId, lastEventId: String(fromSeq) } } },
        }),
      );
    });
    socket.on("message", (raw) => {
      // tRPC's keep-alive: a text PING wants a PONG, as the browser's client answers.
      if (String(raw) === "PING") return socket.send("PONG");
      // A tracked event arrives as { id, data: event } (superjson's `json` around it).
      const message = JSON.parse(String(raw)) as {
        result?: { type: string; data?: { json?: { data?: { createdAt?: string; type?: string } } } };
        error?: unknown;
      };
      if (message.error) return reject(new Error(JSON.stringify(message.error)));
      const event = message.result?.type === "data" ? message.result.data?.json?.data : undefined;
      if (!event?.createdAt) return;
      delays.push(Date.now() - Date.parse(event.createdAt));
      if (event.type === "run.completed" || event.type === "run.failed") finish();
    });
  });
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

function summary(values: number[]) {
  return {
    p50_ms: percentile(values, 50),
    p99_ms: percentile(values, 99),
    max_ms: Math.max(...values),
    samples: values.length,
  };
}

function chromiumExecutable(): string | undefined {
  const bundled = chromium.executablePath();
  if (bundled && existsSync(bundled)) return undefined;
  return ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((candidate) => existsSync(candidate));
}

async function waitForServer(timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`${BASE}/api/trpc/plans.list`, { headers: benchAuth })).ok) return;
    } catch {
      // not up yet
    }
    await delay(300);
  }
  throw new Error("The server did not start");
}

async function main() {
  const server = spawn(process.execPath, ["--import", "tsx", "e2e/serve-for-tests.ts"], {
    env: { ...process.env, PORT: String(PORT), NEXT_TELEMETRY_DISABLED: "1", STEPWISE_ACCESS_TOKEN: BENCH_TOKEN },
    stdio: ["ignore", "ignore", "inherit"],
  });
  const browser = await chromium.launch({
    executablePath: chromiumExecutable(),
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking"],
  });
  const results: Record<string, unknown> = {};
  try {
    await waitForServer(120_000);
    // Warm-up: compile routes and fill caches with one small run watched by one page.
    {
      const { runId } = await preparedRun();
      const page = await (await signedInContext(browser, BASE)).newPage();
      await page.goto(`${BASE}/runs/${runId}`);
      await call("runs.decide", { runId, stepId: "gate", approve: true });
      await page.locator('[data-run-status="completed"]').waitFor({ timeout: 300_000 });
      await page.close();
    }

    for (const viewers of VIEWERS) {
      // commit → subscriber, over the live socket (what the live view uses) and over SSE
      for (const transport of ["ws", "sse"] as const) {
        if (!ONLY.includes(transport)) continue;
        const { runId, lastSeq } = await preparedRun();
        const abort = new AbortController();
        setMaxListeners(viewers + 10, abort.signal); // one listener per subscriber
        const follow = transport === "ws" ? subscribeOverSocket : subscribe;
        const subscribers = Array.from({ length: viewers }, () => follow(runId, lastSeq, abort.signal));
        await delay(500);
        const started = performance.now();
        await call("runs.decide", { runId, stepId: "gate", approve: true });
        const delays = (await Promise.all(subscribers)).flat();
        const makespan = performance.now() - started;
        abort.abort();
        const key = `subscriber_${transport}_${viewers}`;
        results[key] = { viewers, transport, ...summary(delays), makespan_ms: Math.round(makespan) };
        console.log(`commit → subscriber (${transport}), ${viewers} viewer(s):`, results[key]);
      }
      // commit → rendered, in Chromium
      if (ONLY.includes("rendered")) {
        const { runId } = await preparedRun();
        // One browser context per viewer, as separate people would be: Chromium allows six HTTP/1.1
        // connections per host and profile, and each open live view holds one for its stream.
        const contexts: BrowserContext[] = [];
        const pages: Page[] = [];
        for (let i = 0; i < viewers; i++) {
          const context = await signedInContext(browser, BASE);
          contexts.push(context);
          await context.addInitScript(() => {
            const w = window as unknown as { __stepwiseRenderProbe: unknown[]; __longTasks: number[] };
            w.__stepwiseRenderProbe = [];
            w.__longTasks = [];
            new PerformanceObserver((list) => {
              for (const entry of list.getEntries()) w.__longTasks.push(entry.duration);
            }).observe({ type: "longtask", buffered: true });
          });
          const page = await context.newPage();
          await page.goto(`${BASE}/runs/${runId}`, { waitUntil: "commit", timeout: 180_000 });
          await page.getByTestId("connection").filter({ hasText: "live" }).waitFor({ timeout: 120_000 });
          pages.push(page);
        }
        // Long tasks of loading the page are not what is measured: start counting from here.
        await Promise.all(
          pages.map((page) => page.evaluate(() => ((window as unknown as { __longTasks: number[] }).__longTasks = []))),
        );
        await call("runs.decide", { runId, stepId: "gate", approve: true });
        await Promise.all(
          pages.map((page) => page.locator('[data-run-status="completed"]').waitFor({ timeout: 600_000 })),
        );
        const collected = await Promise.all(
          pages.map((page) =>
            page.evaluate(() => {
              const w = window as unknown as {
                __stepwiseRenderProbe: { createdAt: string; renderedAt: number }[];
                __longTasks: number[];
              };
              return {
                delays: w.__stepwiseRenderProbe.map((entry) => entry.renderedAt - Date.parse(entry.createdAt)),
                longTasks: w.__longTasks,
              };
            }),
          ),
        );
        await Promise.all(contexts.map((context) => context.close()));
        const delays = collected.flatMap((c) => c.delays);
        const longTasks = collected.flatMap((c) => c.longTasks);
        results[`rendered_${viewers}`] = {
          viewers,
          ...summary(delays),
          long_tasks: longTasks.length,
          longest_task_ms: longTasks.length ? Math.round(Math.max(...longTasks)) : 0,
          long_tasks_over_200ms: longTasks.filter((d) => d > 200).length,
        };
        console.log(`commit → rendered, ${viewers} viewer(s):`, results[`rendered_${viewers}`]);
      }
    }
    const output = { config: { steps: STEPS, node: process.version, cpus: os.cpus().length }, results };
    await fs.mkdir(path.join("bench", "results"), { recursive: true });
    await fs.writeFile(path.join("bench", "results", "live-view.json"), JSON.stringify(output, null, 2) + "\n");
  } finally {
    await browser.close();
    server.kill("SIGTERM");
    await new Promise((resolve) => server.once("exit", resolve));
  }
}

void main().catch((error) => {
  console.error(error);
  process.exit(1);
});
