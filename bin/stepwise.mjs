#!/usr/bin/env node
// The `stepwise` executable (package.json "bin"): loads the TypeScript CLI through tsx, which is a
// runtime dependency. `npm link` (or `npm install -g .`) in the checkout puts it on PATH; it then
// finds the checkout's data folder and server from any directory.
import { fileURLToPath, pathToFileURL } from "node:url";

// The installation's data folder wherever the command is run from, as the agent verbs already
// look for the server there: `stepwise worker` in another directory joins the same server.
process.env.STEPWISE_DATA_DIR ||= fileURLToPath(new URL("../data", import.meta.url));

// The integration tests start this executable many times; they bundle the same CLI once per run
// (tests/process-bundle.ts) and name the bundle here, which spares each start compiling it.
const bundle = process.env.STEPWISE_CLI_BUNDLE;
if (bundle) {
  await import(pathToFileURL(bundle).href);
} else {
  const { register } = await import("tsx/esm/api");
  register();
  await import("../server/cli/main.ts");
}
