/**
 * `npm test`: everything CI and a new user run, in order — type check, lint, unit tests,
 * integration tests on PostgreSQL (embedded, and the local PostgreSQL service too when it
 * answers), a production build, and browser tests. Ends with one "N passed, N failed" line.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { SERVICE_PASS_FILES } from "../tests/service-pass";

const results = { passed: 0, failed: 0, skipped: 0 };
const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-test-report-"));
const failedStages: string[] = [];
/** Each failed test by name, so the last lines of a long log say what failed, not only how many. */
const failedTests: string[] = [];

let current: ChildProcess | undefined;
let interrupted: NodeJS.Signals | undefined;

/**
 * Runs one stage as a child in its own process group, so an interrupt can stop the stage and
 * everything it started (servers, embedded PostgreSQL) rather than only a wrapper.
 */
async function run(stage: string, command: string, args: string[], env: Record<string, string> = {}): Promise<boolean> {
  if (interrupted) return false;
  console.log(`\n▶ ${stage}: ${command} ${args.join(" ")}`);
  const child = spawn(command, args, {
    stdio: "inherit",
    detached: true,
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", ...env },
  });
  current = child;
  const code = await new Promise<number | null>((resolve) => {
    child.on("exit", (exitCode) => resolve(exitCode));
    child.on("error", () => resolve(null));
  });
  current = undefined;
  const ok = code === 0 && !interrupted;
  if (!ok) failedStages.push(interrupted ? `${stage} (interrupted)` : stage);
  return ok;
}

function onInterrupt(signal: NodeJS.Signals): void {
  if (interrupted) return;
  interrupted = signal;
  console.log(`\n${signal}: stopping the running stage…`);
  // SIGINT to the stage's whole process group, as Ctrl-C would: Playwright then stops its web
  // server (and the server its embedded PostgreSQL) before it exits. On SIGTERM Playwright exits
  // at once and leaves the server, which runs in a process group of its own, behind.
  const stage = current;
  if (!stage?.pid) return;
  signalGroup(stage.pid, "SIGINT");
  // A stage that does not stop in time is stopped for good; nothing it started should outlive it.
  const deadline = setTimeout(() => signalGroup(stage.pid!, "SIGKILL"), 60_000);
  deadline.unref();
  stage.on("exit", () => clearTimeout(deadline));
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

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
  failedStages.push("browser tests (no Chromium)");
  return false;
}

function countVitest(stage: string, file: string) {
  if (!fs.existsSync(file)) return;
  const report = JSON.parse(fs.readFileSync(file, "utf8")) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
    testResults: {
      name: string;
      status: string;
      message?: string;
      assertionResults: { fullName: string; status: string; failureMessages?: string[] }[];
    }[];
  };
  results.passed += report.numPassedTests;
  results.failed += report.numFailedTests;
  results.skipped += report.numPendingTests;
  for (const testFile of report.testResults) {
    const where = path.relative(process.cwd(), testFile.name);
    for (const test of testFile.assertionResults) {
      if (test.status === "failed")
        failedTests.push(`${stage} › ${where} › ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`);
    }
    if (testFile.status === "failed" && !testFile.assertionResults.some((test) => test.status === "failed")) {
      failedTests.push(`${stage} › ${where}: ${firstLine(testFile.message)}`);
    }
  }
}

type PlaywrightSuite = {
  title: string;
  file?: string;
  suites?: PlaywrightSuite[];
  specs?: { title: string; line: number; tests: { status: string; results: { error?: { message?: string } }[] }[] }[];
};

function countPlaywright(file: string) {
  if (!fs.existsSync(file)) return;
  const report = JSON.parse(fs.readFileSync(file, "utf8")) as {
    stats: { expected: number; unexpected: number; flaky: number; skipped: number };
    suites: PlaywrightSuite[];
    errors?: { message?: string }[];
  };
  results.passed += report.stats.expected + report.stats.flaky;
  results.failed += report.stats.unexpected;
  results.skipped += report.stats.skipped;
  const visit = (suite: PlaywrightSuite, file: string | undefined) => {
    for (const spec of suite.specs ?? []) {
      for (const test of spec.tests) {
        if (test.status !== "unexpected") continue;
        const error = test.results.at(-1)?.error?.message;
        failedTests.push(`browser tests › ${file ?? suite.title}:${spec.line} › ${spec.title}: ${firstLine(error)}`);
      }
    }
    for (const child of suite.suites ?? []) visit(child, file ?? child.file);
  };
  for (const suite of report.suites) visit(suite, suite.file);
  for (const error of report.errors ?? []) failedTests.push(`browser tests: ${firstLine(error.message)}`);
}

/** The first line of an error, without terminal colours: enough to tell which check failed. */
function firstLine(message: string | undefined): string {
  const line =
    (message ?? "(no message)")
      .replace(new RegExp(`${String.fromCharCode(27)}\\[[0-9;]*m`, "g"), "")
      .split("\n")
      .find((text) => text.trim()) ?? "";
  // Vitest reports a timeout by the stack it captured where the test was declared.
  return line === "Error: STACK_TRACE_ERROR" ? "timed out (see the log above)" : line;
}

async function vitest(stage: string, project: string, env: Record<string, string> = {}, extraArgs: string[] = []) {
  const out = path.join(reportDir, `${stage.replace(/\W+/g, "-")}.json`);
  await run(
    stage,
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
  countVitest(stage, out);
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
  process.on("SIGINT", () => onInterrupt("SIGINT"));
  process.on("SIGTERM", () => onInterrupt("SIGTERM"));
  await run("generate", "npx", ["tsx", "scripts/prisma-generate.ts"]);
  await run("typecheck", "npx", ["tsc", "--noEmit"]);
  await run("lint", "npx", ["eslint", "."]);
  await vitest("unit", "unit");
  await vitest("integration (embedded PostgreSQL)", "integration", { DATABASE_URL: process.env.DATABASE_URL ?? "" });
  if (!process.env.DATABASE_URL && (await portAnswers(5432))) {
    // Another server and major version: the files whose subject is SQL run again there
    // (tests/service-pass.ts says which and why).
    await vitest(
      "integration (PostgreSQL service on 127.0.0.1:5432)",
      "integration",
      { DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/postgres" },
      SERVICE_PASS_FILES,
    );
  }
  if ((await run("build", "npx", ["next", "build"])) && (await ensureChromium())) {
    const out = path.join(reportDir, "e2e.json");
    await run("browser tests", "npx", ["playwright", "test", "--reporter=list,json"], {
      PLAYWRIGHT_JSON_OUTPUT_NAME: out,
    });
    countPlaywright(out);
  }
  fs.rmSync(reportDir, { recursive: true, force: true });
  if (failedStages.length) console.log(`\nFailed stages: ${failedStages.join(", ")}`);
  if (failedTests.length) console.log(`\nFailed tests:\n${failedTests.map((test) => `  ✗ ${test}`).join("\n")}`);
  // Tests a Ctrl-C stopped are reported by the runners as skipped; they were interrupted, and
  // the stages after the stopped one never started.
  if (interrupted)
    console.log(
      `\nInterrupted by ${interrupted}: ${results.skipped} test(s) in the stopped stage did not run, nor did any stage after it.`,
    );
  const skipped = !interrupted && results.skipped ? `, ${results.skipped} skipped` : "";
  console.log(`\n${results.passed} passed, ${results.failed} failed${skipped}`);
  process.exit(interrupted ? 130 : failedStages.length === 0 && results.failed === 0 ? 0 : 1);
}

void main();
