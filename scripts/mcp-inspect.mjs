#!/usr/bin/env node
/**
 * `npm run mcp:inspect -- <inspector options>`: the MCP Inspector's CLI against the running
 * Stepwise, from the checkout, with nothing to install. Over stdio through `stepwise mcp` by
 * default; with `--http`, over Streamable HTTP at /api/mcp with the agent token from the
 * connection file (`<data>/server.json`, or STEPWISE_DATA_DIR's).
 *
 *   npm run mcp:inspect -- --method tools/list
 *   npm run mcp:inspect -- --http --method tools/call --tool-name planning_read_plan --tool-arg session_id=demo
 *
 * The Inspector reads its own package.json relative to the working directory, so `npx` from
 * elsewhere fails to find its modules; it runs here from its own folder.
 */
import { spawn } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const inspectorDir = path.join(root, "node_modules/@modelcontextprotocol/inspector-cli/build");
if (!fs.existsSync(path.join(inspectorDir, "index.js"))) {
  console.error("The MCP Inspector is not installed: run `npm ci` in the Stepwise checkout first.");
  process.exit(1);
}

const args = process.argv.slice(2);
const http = args[0] === "--http";
const rest = http ? args.slice(1) : args;
let target;
if (http) {
  const dataDir = path.resolve(root, process.env.STEPWISE_DATA_DIR ?? "data");
  const file = path.join(dataDir, "server.json");
  let connection;
  try {
    connection = JSON.parse(fs.readFileSync(file, "utf8"));
  } catch {
    console.error(`No running Stepwise found (${file} is missing): start it with npm start.`);
    process.exit(1);
  }
  target = [
    `${connection.url}/api/mcp`,
    "--transport",
    "http",
    "--header",
    `Authorization: Bearer ${connection.token}`,
  ];
} else {
  target = [process.execPath, path.join(root, "bin/stepwise.mjs"), "mcp"];
}

const child = spawn(process.execPath, [path.join(inspectorDir, "index.js"), ...target, ...rest], {
  cwd: inspectorDir,
  stdio: "inherit",
  env: { ...process.env, STEPWISE_DATA_DIR: path.resolve(root, process.env.STEPWISE_DATA_DIR ?? "data") },
});
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
