import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { buildProcessBundle } from "./process-bundle";
import { CLI_BUNDLE_ENV, PROCESS_BUNDLE_ENV, programBundlePath } from "./program-command";
import { startTestServer } from "./test-database";

export default async function setup() {
  const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-test-pg-"));
  // The bundle builds while the server starts and the template is migrated.
  const [server, bundleDir] = await Promise.all([startTestServer(dataDir), buildProcessBundle()]);
  process.env.STEPWISE_TEST_SERVER_URL = server.serverUrl;
  process.env.STEPWISE_TEST_TEMPLATE_DB = server.templateDb;
  process.env[PROCESS_BUNDLE_ENV] = bundleDir;
  // bin/stepwise.mjs, started by the tests of the executable itself, loads the CLI from it too.
  process.env[CLI_BUNDLE_ENV] = programBundlePath(bundleDir, "server/cli/main.ts");
  return async () => {
    await server.stop();
    await fs.rm(dataDir, { recursive: true, force: true });
    await fs.rm(bundleDir, { recursive: true, force: true });
  };
}
