#!/usr/bin/env node
/**
 * `npm install` generates the database client, as Prisma's convention is, so every script
 * (bench, worker, tests) works on a fresh clone. Offline: see scripts/prisma-generate.ts.
 * Skipped when the Prisma CLI is not installed (a production install without dev dependencies).
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
if (!fs.existsSync(path.join(root, "node_modules/prisma/build/index.js"))) process.exit(0);
const tsx = path.join(root, "node_modules/tsx/dist/cli.mjs");
const result = spawnSync(process.execPath, [tsx, "scripts/prisma-generate.ts"], { cwd: root, stdio: "inherit" });
process.exit(result.status ?? 1);
