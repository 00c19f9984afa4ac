/**
 * `npm test`: everything CI and a new user run — type check, lint, unit tests, integration tests
 * on PostgreSQL (embedded, and the local PostgreSQL service too when it answers), a production
 * build, and browser tests. Ends with the failed tests by name and one "N passed, N failed" line.
 *
 * Stages that do not need each other run side by side (scripts/test-stages.ts streams their
 * lines behind a label): most of a test stage's time is spent waiting on processes, PostgreSQL
 * and browsers, which two cores can overlap with another stage's work. The order below starts the
 * longest chain first; only the browser tests wait, for the integration tests (see browserTests).
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { SERVICE_PASS_FILES } from "../tests/service-pass";
import { countPlaywright, countVitest, failedTests, results } from "./test-reports";
import {
  failedStageNames,
  interruption,
  markFailed,
  reserveLabels,
  runStage,
  seconds,
  stageResults,
  stopStagesOnInterrupt,
} from "./test-stages";

const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-test-report-"));
const SERVICE_URL = "postgresql://postgres@127.0.0.1:5432/postgres";

/**
 * Playwright's own Chromium where it can be installed, else the system one the config falls
 * back to; otherwise the exact thing to install.
 */
async function ensureChromium(): Promise<boolean> {
  const { chromium } = await import("@playwright/test");
  const hasSystem = () => ["/usr/bin/chromium", "/usr/bin/chromium-browser"].some((file) => fs.existsSync(file));
  if (fs.existsSync(chromium.executablePath()) || hasSystem()) return true;
  console.log("\nChromium for the browser tests is missing; installing Playwright's Chromium…");
  const install = spawnSync("npx", ["playwright", "install", "chromium"], { stdio: "inherit" });
  if (install.status === 0 && fs.existsSync(chromium.executablePath())) return true;
  console.log(
    "\nCould not install Chromium. Install it, then run npm test again:\n" +
      "  sudo apt-get install chromium        (Debian/Ubuntu; used from /usr/bin/chromium)\n" +
      "  or: npx playwright install --with-deps chromium",
  );
  markFailed("browser tests (no Chromium)");
  return false;
}

async function vitest(
  stage: string,
  label: string,
  project: string,
  env: Record<string, string> = {},
  extraArgs: string[] = [],
): Promise<boolean> {
  const out = path.join(reportDir, `${stage.replace(/\W+/g, "-")}.json`);
  const ok = await runStage(
    stage,
    label,
    "npx",
    [
      "vitest",
      "run",
      "--project",
      project,
      "--reporter=default",
      "--reporter=json",
      `--outputFile.json=${out}`,
      ...extraArgs,
    ],
    env,
  );
  // The report decides, not only the exit code: a run that reported a failed test exited 0 once.
  if (countVitest(stage, out) && ok) {
    markFailed(stage);
    console.log(`✗ ${stage}: its report lists failed tests`);
    return false;
  }
  return ok;
}

/**
 * The production build runs beside the integration tests; the browser tests start once it is built
 * and the PostgreSQL-service pass is done, beside the rest of the embedded pass. A server and
 * Chromium beside both integration passes on two cores made timing-sensitive pages the first to
 * fail; beside one they run as they do on a busy machine, and the two longest stages overlap
 * instead of following each other (docs/benchmarks.md, "npm test stages", has the figures).
 */
async function browserTests(servicePassDone: Promise<unknown>): Promise<void> {
  const built = await runStage("build", "build", "npx", ["next", "build"]);
  await servicePassDone;
  if (!built || !(await ensureChromium())) return;
  const out = path.join(reportDir, "e2e.json");
  await runStage("browser tests", "browser", "npx", ["playwright", "test", "--reporter=list,json"], {
    PLAYWRIGHT_JSON_OUTPUT_NAME: out,
  });
  countPlaywright(out);
}

/** Both integration passes; `service` settles when the PostgreSQL-service pass is over. */
async function integrationTests(): Promise<{ all: Promise<void>; service: Promise<unknown> }> {
  const embedded = vitest("integration (embedded PostgreSQL)", "integration", "integration", {
    DATABASE_URL: process.env.DATABASE_URL ?? "",
  });
  // Another server and major version: the files whose subject is SQL run there too
  // (tests/service-pass.ts says which and why), at the same time, since they share nothing.
  const service =
    !process.env.DATABASE_URL && (await portAnswers(5432))
      ? vitest(
          "integration (PostgreSQL service on 127.0.0.1:5432)",
          "service pass",
          "integration",
          { DATABASE_URL: SERVICE_URL },
          SERVICE_PASS_FILES,
        )
      : Promise.resolve(true);
  return { all: Promise.all([embedded, service]).then(() => undefined), service };
}

function portAnswers(port: number, host = "127.0.0.1"): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ port, host, timeout: 1000 });
    socket.on("connect", () => (socket.destroy(), resolve(true)));
    socket.on("error", () => resolve(false));
    socket.on("timeout", () => (socket.destroy(), resolve(false)));
  });
}

async function main() {
  stopStagesOnInterrupt();
  reserveLabels(["generate", "typecheck", "lint", "unit", "integration", "service pass", "build", "browser"]);
  const started = Date.now();
  if (await runStage("generate", "generate", "npx", ["tsx", "scripts/prisma-generate.ts"])) {
    const integration = await integrationTests();
    await Promise.all([
      browserTests(integration.service),
      integration.all,
      runStage("typecheck", "typecheck", "npx", ["tsc", "--noEmit"]),
      runStage("lint", "lint", "npx", ["eslint", "--cache", "."]),
      vitest("unit", "unit", "unit"),
    ]);
  }
  fs.rmSync(reportDir, { recursive: true, force: true });
  console.log(
    `\nStage times (wall, side by side): ${stageResults()
      .map((s) => `${s.stage} ${seconds(s.ms)}`)
      .join(", ")}`,
  );
  console.log(`Whole run: ${seconds(Date.now() - started)}`);
  const failedStages = failedStageNames();
  if (failedStages.length) console.log(`\nFailed stages: ${failedStages.join(", ")}`);
  if (failedTests.length) console.log(`\nFailed tests:\n${failedTests.map((test) => `  ✗ ${test}`).join("\n")}`);
  // Tests a Ctrl-C stopped are reported by the runners as skipped; they were interrupted, and
  // the stages after the stopped ones never started.
  const interrupted = interruption();
  if (interrupted)
    console.log(
      `\nInterrupted by ${interrupted}: ${results.skipped} test(s) in the stopped stages did not run, nor did any stage after them.`,
    );
  const skipped = !interrupted && results.skipped ? `, ${results.skipped} skipped` : "";
  console.log(`\n${results.passed} passed, ${results.failed} failed${skipped}`);
  process.exit(interrupted ? 130 : failedStages.length === 0 && results.failed === 0 ? 0 : 1);
}

void main();
