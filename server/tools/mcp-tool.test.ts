import { describe, expect, it } from "vitest";
import { z } from "zod";
import { echoTool } from "./echo";
import { McpConnections } from "./mcp-client";
import { mcpInputSchema, mcpToolDefinition, mcpToolRisk, parseMcpToolName } from "./mcp-tool";
import { createToolRegistry } from "./registry";
import { toolsForWorkspace } from "./types";

describe("an MCP tool's risk from its annotations", () => {
  it("runs ungated only when it says it is read-only and touches no open world", () => {
    expect(mcpToolRisk({ readOnlyHint: true, openWorldHint: false })).toEqual({
      readOnly: true,
      destructive: false,
      idempotent: true,
      requiresApproval: false,
    });
  });

  it("gates a read-only tool of the open world, and one that says nothing (MCP's defaults)", () => {
    expect(mcpToolRisk({ readOnlyHint: true })).toMatchObject({ readOnly: true, requiresApproval: true });
    expect(mcpToolRisk({ readOnlyHint: true, openWorldHint: true }).requiresApproval).toBe(true);
    expect(mcpToolRisk(undefined)).toEqual({
      readOnly: false,
      destructive: true,
      idempotent: false,
      requiresApproval: true,
    });
  });

  it("gates a writing tool even when it says it is neither destructive nor open-world", () => {
    expect(mcpToolRisk({ destructiveHint: false, openWorldHint: false, idempotentHint: true })).toEqual({
      readOnly: false,
      destructive: false,
      idempotent: true,
      requiresApproval: true,
    });
  });
});

describe("MCP tool names", () => {
  it("splits at the first __ after the prefix: server names have no _", () => {
    expect(parseMcpToolName("mcp__docs__search__all")).toEqual({ server: "docs", tool: "search__all" });
    expect(parseMcpToolName("mcp__docs")).toBeUndefined();
    expect(parseMcpToolName("read_file")).toBeUndefined();
  });
});

describe("an MCP tool's input schema", () => {
  it("checks arguments as the JSON Schema says, with paths a plan's problems can name", () => {
    const schema = mcpInputSchema({
      type: "object",
      properties: { path: { type: "string", minLength: 1 }, limit: { type: "integer", maximum: 10 } },
      required: ["path"],
      additionalProperties: false,
    });
    expect(schema.safeParse({ path: "a", limit: 3 }).success).toBe(true);
    const refused = schema.safeParse({ limit: 11, extra: true });
    expect(refused.success).toBe(false);
    expect(refused.error!.issues.map((issue) => issue.path.join(".")).sort()).toEqual(["", "limit", "path"]);
  });

  it("still asks for an object when the schema cannot be converted", () => {
    const schema = mcpInputSchema({ type: "object", properties: { a: { $ref: "#/definitions/nowhere" } } });
    expect(schema.safeParse("text").success).toBe(false);
  });
});

describe("the registry's server tools", () => {
  const server = {
    id: "00000000-0000-4000-8000-000000000001",
    name: "docs",
    connection: { kind: "http" as const, url: "http://127.0.0.1:9/mcp", headers: {} },
    workspaceRoot: "/ws",
  };
  const tool = mcpToolDefinition(
    server,
    { name: "search", inputSchema: { type: "object" }, annotations: { readOnlyHint: true, openWorldHint: false } },
    new McpConnections(),
    { stillConfigured: async () => true, markDown: async () => undefined },
  );

  it("are replaced whole, and a name no server offers is explained", () => {
    const registry = createToolRegistry([echoTool]);
    registry.setServerTools({ tools: [tool], missingReason: (name) => `no ${name}` });
    expect(registry.get("mcp__docs__search")?.requiresApproval).toBe(false);
    expect(registry.list().map((entry) => entry.name)).toEqual(["echo", "mcp__docs__search"]);
    expect(registry.missingReason?.("mcp__docs__gone")).toBe("no mcp__docs__gone");
    registry.setServerTools({ tools: [], missingReason: () => undefined });
    expect(registry.get("mcp__docs__search")).toBeUndefined();
  });

  it("never shadow a built-in", () => {
    const registry = createToolRegistry([echoTool]);
    registry.setServerTools({ tools: [{ ...tool, name: "echo" }], missingReason: () => undefined });
    expect(registry.get("echo")).toBe(echoTool);
  });

  it("refuse a run in another workspace before calling the server", async () => {
    const run = tool.execute(
      {},
      {
        workspaceRoot: "/elsewhere",
        signal: new AbortController().signal,
        runId: "r",
        stepId: "s",
        attempt: 1,
        idempotencyKey: "k",
        effectsStarting: async () => undefined,
        reportProgress: () => undefined,
        log: () => undefined,
      },
    );
    await expect(run).rejects.toThrow(
      "MCP server docs is configured for the workspace /ws; this run acts in /elsewhere",
    );
  });

  it("are offered to plans of their own workspace only", () => {
    expect(toolsForWorkspace([echoTool, tool], "/ws").map((entry) => entry.name)).toEqual([
      "echo",
      "mcp__docs__search",
    ]);
    expect(toolsForWorkspace([echoTool, tool], "/other").map((entry) => entry.name)).toEqual(["echo"]);
  });

  it("of a stdio server wait for a person on a worker that cannot confine its program", () => {
    const stdio = mcpToolDefinition(
      { ...server, connection: { kind: "stdio", command: "node", args: [], env: {}, workspaceRoot: "/ws" } },
      { name: "search", inputSchema: { type: "object" }, annotations: { readOnlyHint: true, openWorldHint: false } },
      new McpConnections(),
      { stillConfigured: async () => true, markDown: async () => undefined },
    );
    const before = process.env.STEPWISE_SANDBOX;
    process.env.STEPWISE_SANDBOX = "off";
    try {
      expect(stdio.requiresApprovalFor?.({})).toBe(true);
      expect(stdio.unapprovedRunRefusal?.({})).toMatch(/cannot confine MCP server docs/);
      // An HTTP server's program is not Stepwise's to confine.
      expect(tool.requiresApprovalFor?.({})).toBe(false);
      expect(tool.unapprovedRunRefusal?.({})).toBeUndefined();
    } finally {
      if (before === undefined) delete process.env.STEPWISE_SANDBOX;
      else process.env.STEPWISE_SANDBOX = before;
    }
  });

  it("describe their output for $step references", () => {
    expect(tool.outputSchema).toBeInstanceOf(z.ZodObject);
  });
});
