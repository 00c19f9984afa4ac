import { z } from "zod";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import type { ListedMcpTool, McpConnections, McpServerRef } from "./mcp-client";
import { RetryableToolError, defineTool, type AnyTool } from "./types";
import { McpServerUnreachable } from "./mcp-client";
import { noSandboxReason, sandboxAvailable } from "./sandbox";

/** Tools of configured MCP servers are named `mcp__<server>__<tool>`. */
export const MCP_TOOL_PREFIX = "mcp__";
/** A server's name: it is part of every tool name, so it has no `_` (the separator is `__`). */
export const MCP_SERVER_NAME = /^[a-z0-9][a-z0-9-]{0,31}$/;
/** Tool names Stepwise takes from a server; others are left out (and said so). */
export const MCP_TOOL_NAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,59}$/;

export function mcpToolName(serverName: string, toolName: string): string {
  return `${MCP_TOOL_PREFIX}${serverName}__${toolName}`;
}

/** The server and tool a name `mcp__<server>__<tool>` stands for, or undefined for other names. */
export function parseMcpToolName(name: string): { server: string; tool: string } | undefined {
  if (!name.startsWith(MCP_TOOL_PREFIX)) return undefined;
  const rest = name.slice(MCP_TOOL_PREFIX.length);
  const separator = rest.indexOf("__");
  if (separator <= 0) return undefined;
  return { server: rest.slice(0, separator), tool: rest.slice(separator + 2) };
}

/**
 * A tool's risk from its annotations, which are the server's hints (MCP's defaults when absent:
 * not read-only, destructive, not idempotent, open-world). Only a tool that says it is read-only
 * and touches no open world (`openWorldHint: false`) runs without a person's approval; anything
 * else — and anything unknown — is gated like a built-in side-effect tool.
 */
export function mcpToolRisk(annotations: ListedMcpTool["annotations"]): {
  readOnly: boolean;
  destructive: boolean;
  idempotent: boolean;
  requiresApproval: boolean;
} {
  const readOnly = annotations?.readOnlyHint === true;
  const closedWorld = annotations?.openWorldHint === false;
  return {
    readOnly,
    destructive: !readOnly && annotations?.destructiveHint !== false,
    idempotent: readOnly || annotations?.idempotentHint === true,
    requiresApproval: !(readOnly && closedWorld),
  };
}

/**
 * The step arguments a tool accepts, from its JSON Schema: converted to zod so that validation,
 * `$step` reference checks and the planner's tool list treat it like a built-in's. A schema the
 * converter cannot read still demands an object, and the server checks the rest.
 */
export function mcpInputSchema(jsonSchema: Record<string, unknown>): z.ZodType {
  try {
    return z.fromJSONSchema(jsonSchema as Parameters<typeof z.fromJSONSchema>[0]);
  } catch {
    return z.record(z.string(), z.unknown());
  }
}

const mcpOutputSchema = z.object({
  text: z.string().describe("The text parts of the result, joined by newlines"),
  content: z.array(z.unknown()).describe("The result's content parts as the server sent them"),
  structuredContent: z.record(z.string(), z.unknown()).optional(),
});
type McpOutput = z.infer<typeof mcpOutputSchema>;

/** The server a tool belongs to, as its step needs it at run time. */
export interface McpToolServer extends McpServerRef {
  workspaceRoot: string;
}

/** What a tool's call asks of the stored configuration. */
export interface McpServerChecks {
  /** Asked right before each call, so a server removed in another process is not called. */
  stillConfigured(serverId: string): Promise<boolean>;
  /** Told when the server could not be reached, so the settings page shows it down. */
  markDown(serverId: string, error: string): Promise<void>;
}

/** One of a server's tools as a Stepwise tool. */
export function mcpToolDefinition(
  server: McpToolServer,
  listed: ListedMcpTool,
  connections: McpConnections,
  checks: McpServerChecks,
): AnyTool {
  const risk = mcpToolRisk(listed.annotations);
  // A stdio server's read-only tool runs unasked only where its program is confined, as a
  // read-only shell command does: a worker without a sandbox holds the step for a person.
  const unconfinable = () => server.connection.kind === "stdio" && !risk.requiresApproval && !sandboxAvailable();
  return defineTool<Record<string, unknown>, McpOutput>({
    name: mcpToolName(server.name, listed.name),
    description: `${listed.description ?? listed.annotations?.title ?? listed.name} (tool ${listed.name} of MCP server ${server.name})`,
    inputSchema: mcpInputSchema(listed.inputSchema) as z.ZodType<Record<string, unknown>>,
    outputSchema: mcpOutputSchema,
    capability: "mcp.call",
    capabilityLabel: `Call MCP server ${server.name}`,
    ...risk,
    requiresApprovalFor: () => risk.requiresApproval || unconfinable(),
    unapprovedRunRefusal: () =>
      unconfinable()
        ? `This worker cannot confine MCP server ${server.name} (${noSandboxReason()}), so the call waits for a person's approval`
        : undefined,
    defaultTimeoutSeconds: 120,
    onlyInWorkspace: server.workspaceRoot,
    marksEffectStart: true,
    async execute(input, context) {
      if (context.workspaceRoot !== server.workspaceRoot) {
        throw new Error(
          `MCP server ${server.name} is configured for the workspace ${server.workspaceRoot}; this run acts in ${context.workspaceRoot}`,
        );
      }
      if (!(await checks.stillConfigured(server.id))) {
        throw new Error(`tool ${mcpToolName(server.name, listed.name)}: MCP server ${server.name} was removed`);
      }
      await context.effectsStarting();
      let result: CallToolResult;
      try {
        result = await connections.callTool(server, listed.name, input, context.signal);
      } catch (error) {
        if (!(error instanceof McpServerUnreachable)) throw error;
        await checks.markDown(server.id, error.message).catch(() => undefined);
        throw new RetryableToolError(error.message, { cause: error });
      }
      const output = toOutput(result);
      if (result.isError) throw new Error(`${listed.name} on MCP server ${server.name} failed: ${output.text}`);
      return output;
    },
  });
}

function toOutput(result: CallToolResult): McpOutput {
  const content = Array.isArray(result.content) ? result.content : [];
  const text = content
    .filter((part): part is { type: "text"; text: string } => part.type === "text")
    .map((part) => part.text)
    .join("\n");
  return {
    text,
    content,
    ...(result.structuredContent && { structuredContent: result.structuredContent }),
  };
}

/**
 * This process's side of the configured MCP servers: its connections, and the snapshot of the
 * servers' tools in the tool registry, read again from the database by `reload` (at start, after
 * each change made here, and on the worker's maintenance tick for changes made elsewhere).
 */
export interface McpRuntime {
  connections: McpConnections;
  reload(): Promise<void>;
  close(): Promise<void>;
}
