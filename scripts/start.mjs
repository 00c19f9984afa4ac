#!/usr/bin/env node
/**
 * `npm start`: the one command a new user runs. Installs dependencies when they are missing or
 * stale, generates the database client, builds the web app when sources changed, then starts
 * Stepwise (embedded PostgreSQL unless DATABASE_URL is set; migrations apply themselves).
 * Written in plain JavaScript because it runs before dependencies exist.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { setInterval, clearInterval } from "node:timers";
import { Buffer } from "node:buffer";
import { fileURLToPath } from "node:url";
import { runInForeground } from "./foreground.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
process.chdir(root);
const env = { ...process.env, NEXT_TELEMETRY_DISABLED: "1" };

const started = Date.now();

function elapsed(since) {
  const seconds = Math.round((Date.now() - since) / 1000);
  return seconds < 60 ? `${seconds} s` : `${Math.floor(seconds / 60)} min ${seconds % 60} s`;
}

/**
 * One preparation step, quiet unless it fails: a line when it starts, a progress line with the
 * elapsed time while it runs (every 30 s; in place on a terminal), a line when it is done. Its own
 * output is kept and shown only if it fails, so a first start reads as a handful of lines.
 */
async function step(label, command, args, expected) {
  const since = Date.now();
  const tty = process.stdout.isTTY === true;
  console.log(`[stepwise] ${label}${expected ? ` (${expected})` : ""}…`);
  const child = spawn(command, args, { stdio: ["ignore", "pipe", "pipe"], env });
  const output = [];
  child.stdout.on("data", (chunk) => output.push(chunk));
  child.stderr.on("data", (chunk) => output.push(chunk));
  const ticker = setInterval(
    () => {
      if (tty) process.stdout.write(`\r[stepwise]   … ${elapsed(since)}`);
      else console.log(`[stepwise]   … ${elapsed(since)}`);
    },
    tty ? 1_000 : 30_000,
  );
  const code = await new Promise((resolve) => {
    child.on("error", () => resolve(1));
    child.on("exit", (exitCode) => resolve(exitCode ?? 1));
  });
  clearInterval(ticker);
  if (tty) process.stdout.write("\r\x1b[K");
  if (code !== 0) {
    process.stdout.write(Buffer.concat(output));
    console.error(`[stepwise] ${label} failed after ${elapsed(since)}.`);
    process.exit(code);
  }
  console.log(`[stepwise] ${label}: done in ${elapsed(since)}`);
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
  await step(
    "Installing dependencies",
    "npm",
    ["ci", "--no-audit", "--no-fund", "--loglevel=error"],
    "first start only",
  );
if (mtime("server/generated/prisma/client.ts") < mtime("prisma/schema.prisma")) {
  await step("Generating the database client", "npx", ["tsx", "scripts/prisma-generate.ts"]);
}
if (process.argv.includes("--prepare-only")) process.exit(0);

const built = mtime(".next/BUILD_ID");
if (
  !built ||
  built <
    Math.max(
      newestIn(["app", "components", "server"]),
      // What the build reads besides the sources: the database client is generated from the
      // schema (and skipped by the walk above), path aliases come from tsconfig.json.
      ...["next.config.js", "package-lock.json", "prisma/schema.prisma", "tsconfig.json"].map(mtime),
    )
) {
  // No type check here (next.config.js): that is `npm test`'s and CI's job.
  await step("Building the web app", "npx", ["next", "build"], "after an install or an update");
}
if (Date.now() - started > 1_000) console.log(`[stepwise] Prepared in ${elapsed(started)}; starting…`);
// Node directly on the CLI's entry point (bin/stepwise.mjs loads tsx itself): no npx resolving
// packages on every start, and no extra process between the terminal and Stepwise. A stop sent to
// this process (or to npm) reaches the server, which stops in order, the embedded database last.
runInForeground(process.execPath, ["bin/stepwise.mjs", "serve", ...process.argv.slice(2)], { env });
