import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { parseTomlSubset, readmeAgentSnippets } from "../../tests/readme-snippets";

/**
 * README.md's "Setting up your agent": each snippet (Claude Code's `.mcp.json` and `claude mcp
 * add`, Codex CLI's config.toml, Cursor's `.cursor/mcp.json`) is read out of the README and started
 * the way that agent starts a stdio server — the SDK's StdioClientTransport with the snippet's
 * command, args and env, which like the agents passes only a few variables of its own environment
 * (PATH, HOME, …) — and must answer tools/list from a real server.
 *
 * What the person's machine provides is set up as the README says: `stepwise` on PATH (a link to
 * bin/stepwise.mjs, as `npm link` makes) and a running Stepwise announced in a data folder's
 * server.json. The test's data folder is a temporary one, named by STEPWISE_DATA_DIR, so it never
 * touches the checkout's own `data/`.
 */
const AGENT_TOKEN = "readme-snippets-agent-token";
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
let home: string;

beforeAll(async () => {
  harness = await startHarness();
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  home = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-readme-"));
  await fs.mkdir(path.join(home, "bin"));
  await fs.symlink(path.resolve("bin/stepwise.mjs"), path.join(home, "bin", "stepwise"));
  await fs.mkdir(path.join(home, "data"));
  await fs.writeFile(
    path.join(home, "data", "server.json"),
    JSON.stringify({ url: api.url, token: AGENT_TOKEN, pid: process.pid, startedAt: new Date().toISOString() }),
    { mode: 0o600 },
  );
});

afterAll(async () => {
  await api?.close();
  await harness?.close();
  if (home) await fs.rm(home, { recursive: true, force: true });
});

describe("README agent setup snippets", () => {
  it("has a snippet for each agent people use", async () => {
    const agents = new Set((await readmeAgentSnippets()).map((snippet) => snippet.agent));
    expect([...agents].sort()).toEqual(["Claude Code", "Codex CLI", "Cursor"]);
  });

  it("starts each snippet's command as its agent would, and it lists Stepwise's tools", async () => {
    const snippets = await readmeAgentSnippets();
    expect(snippets.length).toBeGreaterThanOrEqual(4);
    for (const { agent, config } of snippets) {
      const client = new Client({ name: `readme-${agent}`, version: "1.0.0" });
      const transport = new StdioClientTransport({
        command: config.command,
        args: config.args,
        env: {
          // What the person's machine gives the agent: `stepwise` on PATH (npm link) …
          PATH: `${path.join(home, "bin")}${path.delimiter}${process.env.PATH ?? ""}`,
          // … and the running server's announcement, here in the test's own data folder.
          STEPWISE_DATA_DIR: path.join(home, "data"),
          ...config.env,
        },
        stderr: "pipe",
      });
      let stderr = "";
      transport.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
      try {
        await client.connect(transport);
        const { tools } = await client.listTools();
        const names = tools.map((tool) => tool.name);
        for (const name of [
          "start",
          "status",
          "update",
          "enter_plan_mode",
          "ask_user",
          "submit_plan",
          "plan_review_status",
        ]) {
          expect(names, `${agent}: ${JSON.stringify(config)} ${stderr}`).toContain(name);
        }
      } catch (error) {
        throw new Error(`${agent}'s snippet ${JSON.stringify(config)} failed: ${String(error)}\n${stderr}`, {
          cause: error,
        });
      } finally {
        await client.close().catch(() => undefined);
      }
    }
  });
});

describe("the README's TOML reader", () => {
  it("reads tables, strings, string arrays and inline tables, and refuses the rest", () => {
    expect(
      parseTomlSubset('[mcp_servers.x]\ncommand = "a" # why\nargs = ["b", "c"]\nenv = { K = "v", L = "w" }\n'),
    ).toEqual({ "mcp_servers.x": { command: "a", args: ["b", "c"], env: { K: "v", L: "w" } } });
    expect(() => parseTomlSubset("[t]\nenabled = true\n")).toThrow(/unsupported TOML value/);
  });
});
