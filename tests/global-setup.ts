import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { startTestServer } from "./test-database";

export default async function setup() {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-test-pg-"));
  const server = await startTestServer(dataDir);
  process.env.STEPWISE_TEST_SERVER_URL = server.serverUrl;
  process.env.STEPWISE_TEST_TEMPLATE_DB = server.templateDb;
  return async () => {
    await server.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
  };
}
