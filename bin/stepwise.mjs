#!/usr/bin/env node
// The `stepwise` executable (package.json "bin"): loads the TypeScript CLI through tsx, which is a
// runtime dependency, so `npx stepwise …` works in the repository and after a global install.
import { register } from "tsx/esm/api";

register();
await import("../server/cli/main.ts");
