import fs from "node:fs";
import { chromium, defineConfig } from "@playwright/test";
import { E2E_DATA_DIR, E2E_LLM_PORT, E2E_PORT, E2E_STATE_FILE } from "./e2e/e2e-env";

const port = E2E_PORT;
/**
 * The planner specs start a scripted OpenAI-compatible server on this port (tests/scripted-llm.ts)
 * and the app under test uses it as its provider; other specs never call it.
 */
const llmPort = E2E_LLM_PORT;

/** Playwright's own Chromium cannot be downloaded on every machine; Debian's works the same. */
function chromiumExecutable(): string | undefined {
  const bundled = chromium.executablePath();
  if (bundled && fs.existsSync(bundled)) return undefined;
  return ["/usr/bin/chromium", "/usr/bin/chromium-browser"].find((candidate) => fs.existsSync(candidate));
}

export default defineConfig({
  testDir: "e2e",
  fullyParallel: false,
  workers: 1,
  retries: 0,
  // Backstops, not speed checks: at load 30 on 2 cores a page can take many seconds to render an
  // update; every expectation waits for its condition and passes as soon as it holds.
  timeout: 120_000,
  expect: { timeout: 30_000 },
  reporter: process.env.CI ? [["list"]] : [["list"]],
  // The server makes its access token as `npm start` does; this signs the browser in with it.
  globalSetup: "./e2e/global-setup.ts",
  use: {
    baseURL: `http://127.0.0.1:${port}`,
    storageState: E2E_STATE_FILE,
    trace: "retain-on-failure",
    launchOptions: {
      executablePath: chromiumExecutable(),
      args: [
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
      ],
    },
  },
  projects: [{ name: "chromium", use: { browserName: "chromium" } }],
  webServer: {
    // Run directly (no npx wrapper) and stop with SIGTERM, so serve-for-tests can stop the server
    // and its embedded PostgreSQL and remove its temporary folders; the default is a SIGKILL.
    command: `node --import tsx e2e/serve-for-tests.ts`,
    gracefulShutdown: { signal: "SIGTERM", timeout: 30_000 },
    url: `http://127.0.0.1:${port}/api/trpc/plans.list`,
    env: {
      PORT: String(port),
      STEPWISE_E2E_DATA_DIR: E2E_DATA_DIR,
      NEXT_TELEMETRY_DISABLED: "1",
      STEPWISE_LLM_BASE_URL: `http://127.0.0.1:${llmPort}/v1`,
      STEPWISE_LLM_MODELS: "scripted-planner",
      STEPWISE_LLM_NAME: "Scripted",
      STEPWISE_PLANNER_TIMEOUT_MS: "4000",
      STEPWISE_PLANNER_RETRIES: "0",
    },
    reuseExistingServer: false,
    timeout: 120_000,
    stdout: "pipe",
    stderr: "pipe",
  },
});
