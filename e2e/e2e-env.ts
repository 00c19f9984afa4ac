import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Every port the browser tests listen on is a setting, so they can run beside a running Stepwise
 * or another test run: the app under test (E2E_PORT), the scripted LLM (E2E_LLM_PORT) and the
 * second apps two specs start (E2E_TOKEN_APP_PORT, E2E_UNCONFIGURED_APP_PORT). The second apps
 * take a free port unless told otherwise, so they never collide with anything by default.
 */
export const E2E_PORT = portSetting("E2E_PORT", 3210);
export const E2E_LLM_PORT = portSetting("E2E_LLM_PORT", E2E_PORT + 1000);

/** Where the browser tests' server keeps its data (its server.json included). */
export const E2E_DATA_DIR =
  process.env.STEPWISE_E2E_DATA_DIR ?? path.join(os.tmpdir(), `stepwise-e2e-data-${E2E_PORT}`);
/** A port for a second app: the variable's value when set, else a port free right now. */
export async function extraAppPort(variable: "E2E_TOKEN_APP_PORT" | "E2E_UNCONFIGURED_APP_PORT"): Promise<number> {
  if (process.env[variable]) return portSetting(variable, 0);
  const { findFreePort } = await import("../server/db/embedded");
  return findFreePort();
}

function portSetting(variable: string, fallback: number): number {
  const text = process.env[variable];
  if (text === undefined || text === "") return fallback;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 1 || port > 65535)
    throw new Error(`${variable} must be a port number from 1 to 65535, not "${text}"`);
  return port;
}

/**
 * The signed-in browser state every spec starts from: e2e/global-setup.ts opens the server's
 * sign-in link, as a person does after `npm start`, and saves the session cookie here.
 */
export const E2E_STATE_FILE = path.join(os.tmpdir(), `stepwise-e2e-state-${E2E_PORT}.json`);

/** The person's access token the server made in its data folder (`<data>/access-token`). */
export async function readAccessToken(dataDir: string, timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const token = await fs.readFile(path.join(dataDir, "access-token"), "utf8").then(
      (text) => text.trim(),
      () => "",
    );
    if (token) return token;
    if (Date.now() > deadline) throw new Error(`no access token appeared in ${dataDir}`);
    await sleep(200);
  }
}
