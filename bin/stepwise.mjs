#!/usr/bin/env node
// The `stepwise` executable (package.json "bin"): loads the TypeScript CLI through tsx, which is a
// runtime dependency. `npm link` (or `npm install -g .`) in the checkout puts it on PATH; it then
// finds the checkout's data folder and server from any directory.
import { fileURLToPath } from "node:url";
import { register } from "tsx/esm/api";

// The installation's data folder wherever the command is run from, as the agent verbs already
// look for the server there: `stepwise worker` in another directory joins the same server.
process.env.STEPWISE_DATA_DIR ||= fileURLToPath(new URL("../data", import.meta.url));

register();
await import("../server/cli/main.ts");
