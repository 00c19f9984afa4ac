#!/usr/bin/env node
/**
 * `npm start`: the one command a new user runs. Installs dependencies when they are missing or
 * stale, generates the database client, builds the web app when sources changed, then starts
 * Stepwise (embedded PostgreSQL unless DATABASE_URL is set; migrations apply themselves).
 * Written in plain JavaScript because it runs before dependencies exist.
 */
import { spawnSync } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
process.chdir(root);
const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };

function step(label, command, args) {
  console.log(`[stepwise] ${label}…`);
  const result = spawnSync(command, args, { stdio: "inherit", env });
  if (result.status !== 0) {
    console.error(`[stepwise] ${label} failed.`);
    process.exit(result.status ?? 1);
  }
}

function mtime(file) {
  try {
    return fs.statSync(file).mtimeMs;
  } catch {
    return 0;
  }
}

function newestIn(dirs) {
  let newest = 0;
  const walk = (dir) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (entry.name === "node_modules" || entry.name === "generated" || entry.name.startsWith(".")) continue;
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else newest = Math.max(newest, mtime(full));
    }
  };
  for (const dir of dirs) if (fs.existsSync(dir)) walk(dir);
  return newest;
}

const installed = mtime("node_modules/.package-lock.json");
if (!installed || installed < mtime("package-lock.json"))
  // Quiet unless something is wrong: on Node.js 20 npm would warn that a package of the Prisma
  // CLI that Stepwise never runs (`@prisma/streams-local`) prefers Node.js 22.
  step("Installing dependencies", "npm", ["ci", "--no-audit", "--no-fund", "--loglevel=error"]);
if (mtime("server/generated/prisma/client.ts") < mtime("prisma/schema.prisma")) {
  step("Generating the database client", "npx", ["tsx", "scripts/prisma-generate.ts"]);
}
if (process.argv.includes("--prepare-only")) process.exit(0);

const built = mtime(".next/BUILD_ID");
if (
  !built ||
  built < Math.max(newestIn(["app", "components", "server"]), mtime("next.config.js"), mtime("package-lock.json"))
) {
  step("Building the web app", "npx", ["next", "build"]);
}
// Ctrl-C reaches the server too (same process group); let it shut the database down cleanly.
process.on("SIGINT", () => undefined);
process.on("SIGTERM", () => undefined);
const serve = spawnSync("npx", ["tsx", "server/cli/main.ts", "serve", ...process.argv.slice(2)], {
  stdio: "inherit",
  env,
});
process.exit(serve.status ?? 0);
