import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { setTimeout as sleep } from "node:timers/promises";

/** Where the browser tests' server listens, and the data folder it uses (its server.json included). */
export const E2E_PORT = Number(process.env.E2E_PORT ?? 3210);
export const E2E_DATA_DIR =
  process.env.STEPWISE_E2E_DATA_DIR ?? path.join(os.tmpdir(), `stepwise-e2e-data-${E2E_PORT}`);
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
