/**
 * `npm run bench:ui [-- --runs 7] [-- --steps 300] [-- --comments 100] [-- --breakdown]`: the plan page's two speed
 * figures, measured in a real Chromium against the real server on an embedded PostgreSQL
 * (e2e/serve-for-tests.ts), on a plan under review: `--comments` review comments spread over its
 * steps (a third of them with a reply, one on the whole plan):
 *
 *   - time to interactive: from navigation start until every step card of the plan is rendered
 *     with its drag handle and the server's risk judgement, and the comment counts are shown on
 *     the cards (the page is hydrated, the plan, its assessments and its conversation loaded —
 *     the reviewer can act);
 *   - drop → confirmed (on a second plan of the same shape, without comments): from the
 *     keyboard drop of a step until the page shows the new version
 *     the server stored (optimistic move, server validation, save, response rendered).
 *
 * Needs a production build first: `STEPWISE_NEXT_DIST_DIR=.next-bench npx next build`, then
 * `STEPWISE_NEXT_DIST_DIR=.next-bench npm run bench:ui`. Prints medians and writes
 * bench/results/plan-page.json. Nothing here is a test: it asserts nothing about time.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { benchAuth, BENCH_TOKEN, signedInContext } from "./signed-in";
import { chromium, type Page } from "@playwright/test";

function option(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  return index > 0 ? Number(process.argv[index + 1]) : fallback;
}

const RUNS = option("runs", 7);
/** `--breakdown`: also print, per run, the document's and each API request's timing on the review page. */
const BREAKDOWN = process.argv.includes("--breakdown");
const STEPS = option("steps", 300);
const COMMENTS = option("comments", 100);
const PORT = option("port", 3291);
const BASE = `http://127.0.0.1:${PORT}`;

/** A plan like a large generated one: chains of ten with fan-in, every tenth step independent. */
function bigPlan(size: number) {
  return {
    goal: `Benchmark plan with ${size} steps`,
    steps: Array.from({ length: size }, (_, i) => {
      const id = `step_${i + 1}`;
      const independent = (i + 1) % 10 === 0;
      const dependsOn = independent || i === 0 ? [] : [`step_${i}`];
      if (!independent && i >= 20 && i % 7 === 0) dependsOn.push(`step_${i - 12}`);
      return {
        id,
        description: `Step ${i + 1}: transform the data of the previous step`,
        tool: "echo",
        args: { value: dependsOn.length ? `$${dependsOn[0]}` : i },
        dependsOn,
      };
    }),
  };
}

/** The review page's navigation and API requests, in milliseconds since navigation start. */
async function whereTheTimeWent(page: Page): Promise<string> {
  const entries = await page.evaluate(() => {
    const [navigation] = performance.getEntriesByType("navigation") as PerformanceNavigationTiming[];
    const api = (performance.getEntriesByType("resource") as PerformanceResourceTiming[])
      .filter((entry) => entry.name.includes("/api/"))
      .map((entry) => ({
        name: decodeURIComponent(new URL(entry.name).pathname.replace(/^\/api\/trpc\//, "")),
        start: entry.startTime,
        end: entry.responseEnd,
      }));
    return {
      document: navigation ? navigation.responseEnd : 0,
      domContentLoaded: navigation ? navigation.domContentLoadedEventEnd : 0,
      api,
    };
  });
  const ms = (value: number) => `${value.toFixed(0)} ms`;
  return [
    `  document received ${ms(entries.document)}, DOMContentLoaded ${ms(entries.domContentLoaded)}`,
    ...entries.api.map((entry) => `  ${ms(entry.start)} → ${ms(entry.end)}  ${entry.name}`),
  ].join("\n");
}

/**
 * When the review page became interactive, in ms since navigation start: the last card's drag
 * handle and computed risk are on the page and — with comments — the commented step's toggle shows
 * its count. Checked
 * by the page itself on every frame with two DOM queries: a role query (getByRole with a name)
 * computes the accessible name of every button on the page (some 1,500 here) on each poll, which a
 * profile showed to be a third of the time it measured.
 */
async function whenInteractive(page: Page, lastId: string, commented: string | undefined): Promise<number> {
  const at = await page.waitForFunction(
    ({ lastId, commented }) => {
      const handle = document.querySelector(`[data-step-id="${lastId}"] button.drag-handle`);
      // The server's risk judgement, which arrives after the plan, is on the card too.
      const judged = document.querySelector(`[data-step-id="${lastId}"] [data-testid="computed-risk"]`);
      const toggle = commented
        ? document.querySelector(`[data-step-id="${commented}"] [data-testid="step-comments"] > button`)
        : null;
      const counted = !commented || /^Comments \(\d+ open/.test(toggle?.textContent ?? "");
      return handle !== null && judged !== null && counted ? performance.now() : false;
    },
    { lastId, commented },
    { polling: "raf", timeout: 120_000 },
  );
  return (await at.jsonValue()) as number;
}

/**
 * A sampling CPU profile of the page's main thread until `stop`, which answers the functions that
 * took the most time themselves. It slows the page: the figures of a `--breakdown` run are not the
 * benchmark's.
 */
async function startProfiler(page: Page): Promise<{ stop(): Promise<string> }> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Profiler.enable");
  await cdp.send("Profiler.setSamplingInterval", { interval: 500 });
  await cdp.send("Profiler.start");
  return {
    async stop() {
      const { profile } = await cdp.send("Profiler.stop");
      const total = profile.endTime - profile.startTime;
      const perNode = new Map<number, number>();
      profile.samples?.forEach((node, i) =>
        perNode.set(node, (perNode.get(node) ?? 0) + (profile.timeDeltas?.[i] ?? 0)),
      );
      const byFunction = new Map<string, number>();
      for (const node of profile.nodes) {
        const { functionName, url, lineNumber } = node.callFrame;
        const name = `${functionName || "(anonymous)"} ${url.split("/").pop()}:${lineNumber + 1}`;
        byFunction.set(name, (byFunction.get(name) ?? 0) + (perNode.get(node.id) ?? 0));
      }
      const top = [...byFunction.entries()].sort((a, b) => b[1] - a[1]).slice(0, 15);
      return [
        `  CPU profile of ${(total / 1000).toFixed(0)} ms, most self time:`,
        ...top.map(([name, micros]) => `    ${(micros / 1000).toFixed(0).padStart(6)} ms  ${name}`),
      ].join("\n");
    },
  };
}

async function waitForServer(timeoutMs: number) {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`${BASE}/api/trpc/plans.list`, { headers: benchAuth });
      if (response.ok) return;
    } catch {
      // not up yet
    }
    await delay(300);
  }
  throw new Error("The server did not start");
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length >> 1;
  return sorted.length % 2 ? sorted[middle]! : (sorted[middle - 1]! + sorted[middle]!) / 2;
}

/** Playwright's own Chromium cannot be downloaded on every machine; Debian's works the same. */
function chromiumExecutable(): string | undefined {
  const bundled = chromium.executablePath();
  if (bundled && existsSync(bundled)) return undefined;
  return ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((candidate) => existsSync(candidate));
}

async function mutate<T>(procedure: string, input: unknown): Promise<T> {
  const response = await fetch(`${BASE}/api/trpc/${procedure}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...benchAuth },
    body: JSON.stringify({ json: input }),
  });
  if (!response.ok) throw new Error(`${procedure}: ${response.status} ${await response.text()}`);
  return ((await response.json()) as { result: { data: { json: T } } }).result.data.json;
}

/**
 * `count` comments on version 1: one on the whole plan, the rest on steps spread through the plan
 * (every third with a reply). Returns the last step commented on, whose count the page must show.
 */
async function addComments(planId: string, count: number): Promise<string | undefined> {
  let last: string | undefined;
  for (let i = 0; i < count; i++) {
    if (i === 0) {
      await mutate("plans.comment", { planId, version: 1, body: "Overall the plan reads well" });
      continue;
    }
    const stepId = `step_${1 + ((i * 7) % STEPS)}`;
    const intent = ["comment", "change", "delete", "insert_after"][i % 4];
    if (i % 3 === 0 && last) {
      const threads = await fetch(
        `${BASE}/api/trpc/plans.comments?input=${encodeURIComponent(JSON.stringify({ json: { planId } }))}`,
        { headers: benchAuth },
      ).then(
        async (r) =>
          ((await r.json()) as { result: { data: { json: { comments: { id: string }[] } } } }).result.data.json,
      );
      const parent = threads.comments.at(-1);
      if (parent) {
        await mutate("plans.comment", { planId, version: 1, parentId: parent.id, body: `Reply ${i}: agreed` });
        continue;
      }
    }
    await mutate("plans.comment", {
      planId,
      version: 1,
      stepId,
      intent,
      body: `Comment ${i} on ${stepId}: check this`,
    });
    last = stepId;
  }
  return last;
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
  try {
    await waitForServer(120_000);
    const createPlan = async () => {
      const created = await fetch(`${BASE}/api/trpc/plans.createFromJson`, {
        method: "POST",
        headers: { "content-type": "application/json", ...benchAuth },
        body: JSON.stringify({ json: { planJson: JSON.stringify(bigPlan(STEPS)) } }),
      });
      return ((await created.json()) as { result: { data: { json: { id: string } } } }).result.data.json.id;
    };
    // Two plans alike: one under review (the comments) for time to interactive, one the drops
    // change version by version.
    const planId = await createPlan();
    const reviewedId = await createPlan();
    const lastId = `step_${STEPS}`;
    const commented = await addComments(reviewedId, COMMENTS);

    const interactive: number[] = [];
    const dropToConfirmed: number[] = [];
    for (let run = 0; run <= RUNS; run++) {
      const reviewPage = await (await signedInContext(browser, BASE)).newPage();
      const profiler = BREAKDOWN ? await startProfiler(reviewPage) : undefined;
      await reviewPage.goto(`${BASE}/plans/${reviewedId}`, { waitUntil: "commit" });
      const ready = await whenInteractive(reviewPage, lastId, commented);
      if (profiler && run > 0) {
        console.log(`run ${run}: where the time went\n${await whereTheTimeWent(reviewPage)}\n${await profiler.stop()}`);
      }
      await reviewPage.close();

      const page = await (await signedInContext(browser, BASE)).newPage();
      await page.goto(`${BASE}/plans/${planId}`, { waitUntil: "commit" });
      await page.getByRole("button", { name: `Move ${lastId}`, exact: true }).waitFor();

      // Drop an independent step one place up, timing from the drop key to the new version on screen.
      const stepIndex = 10 * (run + 1); // step_10, step_20, …: no dependencies, no dependents
      const handle = page.getByRole("button", { name: `Move step_${stepIndex}`, exact: true });
      const versionText = await page.getByTestId("plan-version").innerText();
      const version = Number(versionText.replace(/\D/g, ""));
      await handle.focus();
      const live = page.locator("[id^='DndLiveRegion']");
      await page.keyboard.press("Space");
      // The list announces the pick-up (not "over itself", which is no news: step-list.tsx).
      await live.filter({ hasText: `Picked up step_${stepIndex} at position` }).waitFor({ state: "attached" });
      await delay(100); // dnd-kit measures the list after the lift
      await page.keyboard.press("ArrowUp");
      await live.filter({ hasText: `is over position ${stepIndex - 1} ` }).waitFor({ state: "attached" });
      await delay(100);
      await page.evaluate(
        (expected) => {
          const target = document.querySelector("[data-testid='plan-version']")!;
          const w = window as unknown as { __confirmedAt?: number; __droppedAt?: number };
          new MutationObserver(() => {
            if (target.textContent === expected && w.__confirmedAt === undefined) w.__confirmedAt = performance.now();
          }).observe(target, { childList: true, characterData: true, subtree: true });
          document.addEventListener("keydown", () => (w.__droppedAt ??= performance.now()), {
            capture: true,
            once: true,
          });
        },
        `version ${version + 1}`,
      );
      await page.keyboard.press("Space");
      await page
        .getByTestId("plan-version")
        .filter({ hasText: `version ${version + 1}` })
        .waitFor({ timeout: 10_000 })
        .catch(async (error) => {
          const announced = await live.textContent();
          const notice = await page
            .getByTestId("plan-notice")
            .innerText()
            .catch(() => "");
          throw new Error(`The drop of step_${stepIndex} was not saved. Announced: ${announced}. Notice: ${notice}`, {
            cause: error,
          });
        });
      const { droppedAt, confirmedAt, request } = await page.evaluate(() => {
        const w = window as unknown as { __confirmedAt: number; __droppedAt: number };
        const edit = performance.getEntriesByType("resource").find((entry) => entry.name.includes("plans.edit")) as
          PerformanceResourceTiming | undefined;
        return {
          droppedAt: w.__droppedAt,
          confirmedAt: w.__confirmedAt,
          request: edit ? { start: edit.startTime, end: edit.responseEnd } : null,
        };
      });
      await page.close();
      if (run === 0) continue; // warm-up: first compile of routes, cold caches
      interactive.push(ready);
      dropToConfirmed.push(confirmedAt - droppedAt);
      const split = request
        ? ` (drop → request ${(request.start - droppedAt).toFixed(0)} ms, request ${(request.end - request.start).toFixed(0)} ms, response → shown ${(confirmedAt - request.end).toFixed(0)} ms)`
        : "";
      console.log(
        `run ${run}: interactive ${ready.toFixed(0)} ms, drop → confirmed ${(confirmedAt - droppedAt).toFixed(0)} ms${split}`,
      );
    }
    const result = {
      steps: STEPS,
      comments: COMMENTS,
      runs: RUNS,
      interactiveMs: { median: median(interactive), min: Math.min(...interactive), max: Math.max(...interactive) },
      dropToConfirmedMs: {
        median: median(dropToConfirmed),
        min: Math.min(...dropToConfirmed),
        max: Math.max(...dropToConfirmed),
      },
    };
    console.table({
      [`time to interactive (${STEPS} steps, ${COMMENTS} comments)`]: {
        ...round(result.interactiveMs),
        goal: "< 1500 ms",
      },
      ["drop → confirmed version"]: { ...round(result.dropToConfirmedMs), goal: "< 150 ms" },
    });
    await fs.mkdir(path.join("bench", "results"), { recursive: true });
    await fs.writeFile(path.join("bench", "results", "plan-page.json"), JSON.stringify(result, null, 2) + "\n");
  } finally {
    await browser.close();
    server.kill("SIGTERM");
    await new Promise((resolve) => server.once("exit", resolve));
  }
}

function round(figure: { median: number; min: number; max: number }) {
  return { median: Math.round(figure.median), min: Math.round(figure.min), max: Math.round(figure.max) };
}

void main().catch((error) => {
  console.error(error);
  process.exit(1);
});
