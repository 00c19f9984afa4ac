/**
 * `npm test`: everything CI and a new user run, in order — type check, lint, unit tests,
 * integration tests on PostgreSQL (embedded, and the local PostgreSQL service too when it
 * answers), a production build, and browser tests. Ends with one "N passed, N failed" line.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";

const results = { passed: 0, failed: 0, skipped: 0 };
const reportDir = fs.mkdtempSync(path.join(os.tmpdir(), "stepwise-test-report-"));
const failedStages: string[] = [];

function run(stage: string, command: string, args: string[], env: Record<string, string> = {}): boolean {
  console.log(`\n▶ ${stage}: ${command} ${args.join(" ")}`);
  const result = spawnSync(command, args, {
    stdio: "inherit",
    env: { ...process.env, NEXT_TELEMETRY_DISABLED: "1", ...env },
  });
  const ok = result.status === 0;
  if (!ok) failedStages.push(stage);
  return ok;
}

function countVitest(file: string) {
  if (!fs.existsSync(file)) return;
  const report = JSON.parse(fs.readFileSync(file, "utf8")) as {
    numPassedTests: number;
    numFailedTests: number;
    numPendingTests: number;
  };
  results.passed += report.numPassedTests;
  results.failed += report.numFailedTests;
  results.skipped += report.numPendingTests;
}

function countPlaywright(file: string) {
  if (!fs.existsSync(file)) return;
  const report = JSON.parse(fs.readFileSync(file, "utf8")) as {
    stats: { expected: number; unexpected: number; flaky: number; skipped: number };
  };
  results.passed += report.stats.expected + report.stats.flaky;
  results.failed += report.stats.unexpected;
  results.skipped += report.stats.skipped;
}

function vitest(stage: string, project: string, env: Record<string, string> = {}) {
  const out = path.join(reportDir, `${stage.replace(/\W+/g, "-")}.json`);
  run(
    stage,
    "npx",
    ["vitest", "run", "--project", project, "--reporter=default", "--reporter=json", `--outputFile.json=${out}`],
    env,
  );
  countVitest(out);
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
  run("generate", "npx", ["tsx", "scripts/prisma-generate.ts"]);
  run("typecheck", "npx", ["tsc", "--noEmit"]);
  run("lint", "npx", ["eslint", "."]);
  vitest("unit", "unit");
  vitest("integration (embedded PostgreSQL)", "integration", { DATABASE_URL: process.env.DATABASE_URL ?? "" });
  if (!process.env.DATABASE_URL && (await portAnswers(5432))) {
    vitest("integration (PostgreSQL service on 127.0.0.1:5432)", "integration", {
      DATABASE_URL: "postgresql://postgres@127.0.0.1:5432/postgres",
    });
  }
  if (run("build", "npx", ["next", "build"])) {
    const out = path.join(reportDir, "e2e.json");
    run("browser tests", "npx", ["playwright", "test", "--reporter=list,json"], { PLAYWRIGHT_JSON_OUTPUT_NAME: out });
    countPlaywright(out);
  }
  fs.rmSync(reportDir, { recursive: true, force: true });
  if (failedStages.length) console.log(`\nFailed stages: ${failedStages.join(", ")}`);
  console.log(
    `\n${results.passed} passed, ${results.failed} failed${results.skipped ? `, ${results.skipped} skipped` : ""}`,
  );
  process.exit(failedStages.length === 0 && results.failed === 0 ? 0 : 1);
}

void main();
