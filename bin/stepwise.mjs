#!/usr/bin/env node
// The `stepwise` executable (package.json "bin"): loads the TypeScript CLI through tsx, which is a
// runtime dependency. `npm link` (or `npm install -g .`) in the checkout puts it on PATH; it then
// finds the checkout's data folder and server from any directory.
import { register } from "tsx/esm/api";

register();
await import("../server/cli/main.ts");
