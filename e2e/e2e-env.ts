import os from "node:os";
import path from "node:path";

/** Where the browser tests' server listens, and the data folder it uses (its server.json included). */
export const E2E_PORT = Number(process.env.E2E_PORT ?? 3210);
export const E2E_DATA_DIR =
  process.env.STEPWISE_E2E_DATA_DIR ?? path.join(os.tmpdir(), `stepwise-e2e-data-${E2E_PORT}`);
