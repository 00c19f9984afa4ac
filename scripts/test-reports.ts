/**
 * What `npm test` reads from the runners' JSON reports: how many tests passed, failed and were
 * skipped, and each failed test by name, so the last lines of a long log say what failed, not
 * only how many.
 */
import fs from "node:fs";
import path from "node:path";

export const results = { passed: 0, failed: 0, skipped: 0 };
export const failedTests: string[] = [];

/** Counts a vitest JSON report; returns whether it holds a failure (a test, or a file that did not load). */
export function countVitest(stage: string, file: string): boolean {
  if (!fs.existsSync(file)) return false;
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
  let failed = report.numFailedTests > 0;
  for (const testFile of report.testResults) {
    if (testFile.status === "failed") failed = true;
    const where = path.relative(process.cwd(), testFile.name);
    for (const test of testFile.assertionResults) {
      if (test.status === "failed")
        failedTests.push(`${stage} › ${where} › ${test.fullName}: ${firstLine(test.failureMessages?.[0])}`);
    }
    if (testFile.status === "failed" && !testFile.assertionResults.some((test) => test.status === "failed")) {
      failedTests.push(`${stage} › ${where}: ${firstLine(testFile.message)}`);
    }
  }
  return failed;
}

type PlaywrightSuite = {
  title: string;
  file?: string;
  suites?: PlaywrightSuite[];
  specs?: { title: string; line: number; tests: { status: string; results: { error?: { message?: string } }[] }[] }[];
};

export function countPlaywright(file: string) {
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
