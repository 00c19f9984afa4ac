import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { build } from "esbuild";
import { afterEach, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { FIXTURE_TOKEN, startHttpMcpFixture } from "../../tests/mcp-fixture";
import { invokeOperation } from "../operations/operation";
import { mcpServerAdd } from "../operations/mcp-servers";
import { toolCatalogue } from "../planner/prompts";
import { sandboxAvailable } from "../tools/sandbox";

/**
 * Tools of configured MCP servers, end to end: a stdio server (started confined through the
 * launcher) and a Streamable HTTP server, both written here, each with a read-only tool and a
 * destructive one. Registering lists their tools; a plan runs the read-only tool without a
 * person and waits for one on the destructive tool; arguments are checked against the tool's
 * JSON Schema; a tool that disappears fails plan validation; a server that is down fails its step.
 */

/** The stdio fixture: bundled into the workspace, since the sandbox sees no node_modules. */
const STDIO_SERVER = `
import fs from "node:fs";
import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";

const server = new McpServer({ name: "notes", version: "1" });
server.registerTool(
  "read_note",
  {
    description: "Read a file",
    inputSchema: { path: z.string().min(1), maxChars: z.number().int().optional() },
    annotations: { readOnlyHint: true, openWorldHint: false },
  },
  async ({ path }) => {
    try {
      return { content: [{ type: "text", text: fs.readFileSync(path, "utf8") }] };
    } catch (error) {
      return { isError: true, content: [{ type: "text", text: String(error.message) }] };
    }
  },
);
server.registerTool(
  "whoami",
  { description: "What the server sees", inputSchema: {}, annotations: { readOnlyHint: true, openWorldHint: false } },
  async () => ({
    content: [{ type: "text", text: JSON.stringify({ env: process.env, uid: process.getuid(), cwd: process.cwd() }) }],
  }),
);
// The workspace decides whether the destructive tool is offered: a test takes it away.
if (!fs.existsSync("hide-delete")) {
  server.registerTool(
    "delete_note",
    { description: "Delete a note", inputSchema: { path: z.string() }, annotations: { destructiveHint: true } },
    async ({ path }) => ({ content: [{ type: "text", text: "deleted " + path }] }),
  );
}
await server.connect(new StdioServerTransport());
`;

let harness: Harness;
let bundle: string;
const closers: (() => Promise<void>)[] = [];

beforeAll(async () => {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "mcp-fixture-"));
  await fs.writeFile(path.join(dir, "server.mjs"), STDIO_SERVER);
  const out = await build({
    entryPoints: [path.join(dir, "server.mjs")],
    bundle: true,
    platform: "node",
    format: "esm",
    write: false,
    nodePaths: [path.resolve("node_modules")],
    logLevel: "silent",
  });
  bundle = out.outputFiles[0]!.text;
  await fs.rm(dir, { recursive: true, force: true });
}, 120_000);

afterEach(async () => {
  while (closers.length) await closers.pop()!();
  await harness?.close();
});

async function stdioServer(h: Harness, name = "notes") {
  await fs.writeFile(path.join(h.workspace, "notes-server.mjs"), bundle);
  const { server } = await h.caller.mcpServers.add({
    name,
    transport: "stdio",
    command: "node",
    args: ["notes-server.mjs"],
    env: { FIXTURE_TOKEN: "given-by-the-person" },
  });
  return server;
}

function planJson(steps: unknown[]) {
  return JSON.stringify({ goal: "Use MCP tools", steps });
}

/** The messages of a plan refused as invalid (its problems travel in the error's details). */
async function planProblems(refusal: Promise<unknown>): Promise<string[]> {
  const error = await refusal.then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  const details = (error as { cause?: { details?: { message: string }[] } } | undefined)?.cause?.details;
  if (!Array.isArray(details)) throw new Error(`The plan was not refused as invalid: ${String(error)}`);
  return details.map((problem) => problem.message);
}

async function stepOf(h: Harness, runId: string, stepId: string) {
  return (await h.caller.runs.get({ runId })).steps.find((step) => step.stepId === stepId)!;
}

describe.runIf(sandboxAvailable())("a stdio MCP server, started confined through the launcher", () => {
  it("lists its tools with their risk, runs the read-only tool ungated and the destructive one after approval", async () => {
    harness = await startHarness();
    const server = await stdioServer(harness);
    expect(server.status).toBe("ok");
    expect(server.lastError).toBeNull();
    expect(server.envNames).toEqual(["FIXTURE_TOKEN"]);
    expect(JSON.stringify(server)).not.toContain("given-by-the-person");
    const byName = Object.fromEntries(server.tools.map((tool) => [tool.name, tool]));
    expect(Object.keys(byName).sort()).toEqual([
      "mcp__notes__delete_note",
      "mcp__notes__read_note",
      "mcp__notes__whoami",
    ]);
    expect(byName.mcp__notes__read_note).toMatchObject({ readOnly: true, requiresApproval: false });
    expect(byName.mcp__notes__delete_note).toMatchObject({ destructive: true, requiresApproval: true });

    // The planner's catalogue offers them, with their schemas and risk.
    const catalogue = toolCatalogue(harness.app.tools.list()).split("\n- ");
    const readNote = catalogue.find((entry) => entry.startsWith("mcp__notes__read_note "));
    expect(readNote).toContain("(Call MCP server notes; read-only)");
    expect(readNote).toContain('"path":{"type":"string","minLength":1}');
    const deleteNote = catalogue.find((entry) => entry.startsWith("mcp__notes__delete_note "));
    expect(deleteNote).toContain("destructive: set approvalRequired true; requires approval");

    await fs.writeFile(path.join(harness.workspace, "todo.txt"), "buy milk\n");
    const plan = await harness.caller.plans.createFromJson({
      planJson: planJson([
        { id: "step_1", description: "read", tool: "mcp__notes__read_note", args: { path: "todo.txt" } },
        {
          id: "step_2",
          description: "delete",
          tool: "mcp__notes__delete_note",
          args: { path: "todo.txt" },
          dependsOn: ["step_1"],
        },
      ]),
    });
    expect(plan.steps.map((step) => step.approvalRequired)).toEqual([false, true]);
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    await expect
      .poll(async () => (await stepOf(harness, runId, "step_2")).status, { timeout: 60_000 })
      .toBe("awaiting_approval");
    const first = await stepOf(harness, runId, "step_1");
    expect(first.status).toBe("completed");
    expect(first.result?.value).toMatchObject({ text: "buy milk\n" });
    expect((await stepOf(harness, runId, "step_2")).result).toBeFalsy();

    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect((await stepOf(harness, runId, "step_2")).result?.value).toMatchObject({ text: "deleted todo.txt" });
  }, 180_000);

  it("runs the server confined: only the given environment, no file outside the workspace", async () => {
    harness = await startHarness();
    await stdioServer(harness);
    const outside = await fs.mkdtemp(path.join(os.tmpdir(), "outside-"));
    closers.push(() => fs.rm(outside, { recursive: true, force: true }));
    await fs.writeFile(path.join(outside, "secret.txt"), "not for the server");
    const plan = await harness.caller.plans.createFromJson({
      planJson: planJson([
        { id: "step_1", description: "who", tool: "mcp__notes__whoami", args: {} },
        {
          id: "step_2",
          description: "outside",
          tool: "mcp__notes__read_note",
          args: { path: path.join(outside, "secret.txt") },
          retry: { maxAttempts: 1 },
        },
      ]),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    await harness.waitForRun(runId, ["completed", "failed"], 120_000);
    const seen = JSON.parse(((await stepOf(harness, runId, "step_1")).result?.value as { text: string }).text) as {
      env: Record<string, string>;
      uid: number;
      cwd: string;
    };
    expect(seen.env.FIXTURE_TOKEN).toBe("given-by-the-person");
    // Nothing of Stepwise's own environment: only the sandbox's minimal variables and the given one.
    expect(seen.env.DATABASE_URL).toBeUndefined();
    const allowed = new Set(["FIXTURE_TOKEN", "PATH", "HOME", "LANG", "TERM", "PWD", "SHLVL", "_"]);
    expect(Object.keys(seen.env).filter((name) => !allowed.has(name))).toEqual([]);
    expect(seen.uid).toBe(65534);
    expect(seen.cwd).toBe(harness.workspace);
    const outsideStep = await stepOf(harness, runId, "step_2");
    expect(outsideStep.status).toBe("failed");
    expect(outsideStep.error).toMatch(/ENOENT/);
  }, 180_000);

  it("checks step arguments against the tool's JSON Schema", async () => {
    harness = await startHarness({ worker: false });
    await stdioServer(harness);
    const wrongTypes = await planProblems(
      harness.caller.plans.createFromJson({
        planJson: planJson([
          { id: "step_1", description: "read", tool: "mcp__notes__read_note", args: { path: 5, maxChars: 1.5 } },
        ]),
      }),
    );
    expect(wrongTypes).toEqual([
      expect.stringMatching(/^step_1: args\.path: .*expected string/),
      expect.stringMatching(/^step_1: args\.maxChars: .*int/),
    ]);
    const missing = await planProblems(
      harness.caller.plans.createFromJson({
        planJson: planJson([{ id: "step_1", description: "read", tool: "mcp__notes__read_note", args: {} }]),
      }),
    );
    expect(missing).toEqual([expect.stringMatching(/^step_1: args\.path: /)]);
  }, 120_000);

  it("a tool the server no longer offers fails plan validation, saying so", async () => {
    harness = await startHarness({ worker: false });
    const server = await stdioServer(harness);
    await fs.writeFile(path.join(harness.workspace, "hide-delete"), "");
    const { server: refreshed } = await harness.caller.mcpServers.refresh({ id: server.id });
    expect(refreshed.status).toBe("ok");
    expect(refreshed.toolChanges).toEqual({ added: [], removed: ["delete_note"] });
    expect(refreshed.tools.map((tool) => tool.serverTool).sort()).toEqual(["read_note", "whoami"]);
    const problems = await planProblems(
      harness.caller.plans.createFromJson({
        planJson: planJson([
          { id: "step_1", description: "delete", tool: "mcp__notes__delete_note", args: { path: "x" } },
        ]),
      }),
    );
    expect(problems).toEqual([
      "step_1: tool mcp__notes__delete_note is no longer offered by server notes (it offers: read_note, whoami)",
    ]);
  }, 120_000);
});

describe("a Streamable HTTP MCP server", () => {
  it("is reached with its headers, kept secret, and its tools run through plans", async () => {
    harness = await startHarness();
    const web = await startHttpMcpFixture();
    closers.push(web.close);
    const { server } = await harness.caller.mcpServers.add({
      name: "web",
      transport: "http",
      url: web.url,
      headers: { Authorization: FIXTURE_TOKEN },
    });
    expect(server.status).toBe("ok");
    expect(server.headerNames).toEqual(["Authorization"]);
    expect(JSON.stringify(await harness.caller.mcpServers.list({}))).not.toContain("fixture-secret-token");
    expect(server.tools.map((tool) => [tool.serverTool, tool.requiresApproval]).sort()).toEqual([
      ["lookup", false],
      // No annotations: unknown risk, gated.
      ["publish", true],
    ]);

    const plan = await harness.caller.plans.createFromJson({
      planJson: planJson([
        { id: "step_1", description: "look up", tool: "mcp__web__lookup", args: { word: "plan" } },
        {
          id: "step_2",
          description: "publish",
          tool: "mcp__web__publish",
          args: { title: "$step_1.text" },
          dependsOn: ["step_1"],
        },
      ]),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    await expect
      .poll(async () => (await stepOf(harness, runId, "step_2")).status, { timeout: 60_000 })
      .toBe("awaiting_approval");
    expect(web.calls).toEqual([{ tool: "lookup", args: { word: "plan" } }]);
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    expect((await stepOf(harness, runId, "step_1")).result?.value).toMatchObject({
      structuredContent: { word: "plan", length: 4 },
    });
    expect(web.calls[1]).toEqual({ tool: "publish", args: { title: "plan: a word" } });
  }, 120_000);

  it("shows a server it cannot reach as down, and a step on a server gone down fails saying why", async () => {
    harness = await startHarness();
    const web = await startHttpMcpFixture();
    const wrong = await harness.caller.mcpServers.add({
      name: "wrong-token",
      transport: "http",
      url: web.url,
      headers: { Authorization: "Bearer nope" },
    });
    expect(wrong.server.status).toBe("down");
    expect(wrong.server.lastError).toMatch(/MCP server wrong-token is not reachable/);

    await harness.caller.mcpServers.add({
      name: "web",
      transport: "http",
      url: web.url,
      headers: { Authorization: FIXTURE_TOKEN },
    });
    await web.close();
    const plan = await harness.caller.plans.createFromJson({
      planJson: planJson([
        {
          id: "step_1",
          description: "look up",
          tool: "mcp__web__lookup",
          args: { word: "gone" },
          retry: { maxAttempts: 1 },
        },
      ]),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("failed");
    expect((await stepOf(harness, runId, "step_1")).error).toMatch(/MCP server web is not reachable/);
    // The settings page shows it down, with the error, without anyone refreshing it.
    const shown = (await harness.caller.mcpServers.list({})).servers.find((server) => server.name === "web")!;
    expect(shown.status).toBe("down");
    expect(shown.lastError).toMatch(/MCP server web is not reachable/);
  }, 120_000);

  it("a removed server's tools leave the registry, its waiting step fails saying why, and its name is not reused", async () => {
    harness = await startHarness();
    const web = await startHttpMcpFixture();
    closers.push(web.close);
    const add = () =>
      harness.caller.mcpServers.add({
        name: "web",
        transport: "http",
        url: web.url,
        headers: { Authorization: FIXTURE_TOKEN },
      });
    const { server } = await add();
    const plan = await harness.caller.plans.createFromJson({
      planJson: planJson([
        {
          id: "step_1",
          description: "publish",
          tool: "mcp__web__publish",
          args: { title: "t" },
          retry: { maxAttempts: 1 },
        },
      ]),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    await expect
      .poll(async () => (await stepOf(harness, runId, "step_1")).status, { timeout: 60_000 })
      .toBe("awaiting_approval");

    await harness.caller.mcpServers.remove({ id: server.id });
    expect(harness.app.tools.get("mcp__web__publish")).toBeUndefined();
    await harness.caller.runs.decide({ runId, stepId: "step_1", approve: true });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("failed");
    expect((await stepOf(harness, runId, "step_1")).error).toBe("tool mcp__web__publish: MCP server web was removed");
    expect(web.calls).toEqual([]);

    // The name keeps meaning the server that was approved: another server cannot take it.
    await expect(add()).rejects.toThrow("The name web belonged to a removed MCP server and is not reused");
    const problems = await planProblems(
      harness.caller.plans.createFromJson({
        planJson: planJson([{ id: "step_1", description: "look up", tool: "mcp__web__lookup", args: { word: "x" } }]),
      }),
    );
    expect(problems).toEqual(["step_1: tool mcp__web__lookup: MCP server web was removed"]);
    expect((await harness.caller.mcpServers.list({})).servers).toEqual([]);
  }, 120_000);

  it("refuses a server described wrongly with the fields at fault, storing nothing", async () => {
    harness = await startHarness({ worker: false });
    const admin = { app: harness.app, identity: { kind: "person" as const, name: "ada", role: "admin" as const } };
    const faults = async (input: unknown) => {
      const refusal = (await invokeOperation(mcpServerAdd, admin, input).catch((error: unknown) => error)) as {
        code?: string;
        details?: { issues: { path: string[] }[] };
      };
      expect(refusal.code).toBe("invalid_input");
      return refusal.details!.issues.map((issue) => issue.path.join(".")).sort();
    };
    expect(await faults({ name: "Bad_Name", transport: "stdio", command: "node", env: { "1X": "v" } })).toEqual([
      "env.1X",
      "name",
    ]);
    expect(await faults({ name: "good", transport: "stdio", url: "http://127.0.0.1:9/mcp" })).toEqual([
      "command",
      "url",
    ]);
    expect(await faults({ name: "good", transport: "http", url: "ftp://example.com/mcp" })).toEqual(["url"]);
    const stored = await harness.app.db.pool.query("select count(*)::int as n from mcp_servers");
    expect(stored.rows[0]).toEqual({ n: 0 });
  }, 120_000);

  it("only an admin registers a server, and the change is audited", async () => {
    harness = await startHarness({ worker: false });
    const input = { name: "by-approver", transport: "http", url: "http://127.0.0.1:9/mcp" };
    await expect(
      invokeOperation(
        mcpServerAdd,
        { app: harness.app, identity: { kind: "person", name: "ann", role: "approver" } },
        input,
      ),
    ).rejects.toThrow(/needs the role admin/);
    await expect(
      invokeOperation(mcpServerAdd, { app: harness.app, identity: { kind: "agent", name: "bot" } }, input),
    ).rejects.toThrow(/mcpServer\.add/);
    expect((await harness.caller.mcpServers.list({})).servers).toEqual([]);

    await invokeOperation(
      mcpServerAdd,
      { app: harness.app, identity: { kind: "person", name: "ada", role: "admin" } },
      input,
    );
    const audit = await harness.app.db.pool.query<{ actor: string; action: string }>(
      "select actor, action from audit_entries where plan_id like 'mcp_server:%' order by seq",
    );
    expect(audit.rows).toEqual([
      { actor: "ada", action: "mcp_server.added" },
      { actor: "ada", action: "mcp_server.refreshed" },
    ]);
  }, 120_000);
});
