import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import type { Transport } from "@modelcontextprotocol/sdk/shared/transport.js";
import { ErrorCode, McpError, type CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { LauncherStdioTransport, type ConfinedServerProgram } from "./mcp-launcher-transport";

/** How Stepwise reaches one configured MCP server. */
export type McpServerConnection =
  ({ kind: "stdio" } & ConfinedServerProgram) | { kind: "http"; url: string; headers: Record<string, string> };

export interface McpServerRef {
  id: string;
  name: string;
  connection: McpServerConnection;
}

/** A tool as a server lists it (the fields Stepwise keeps). */
export interface ListedMcpTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: {
    title?: string;
    readOnlyHint?: boolean;
    destructiveHint?: boolean;
    idempotentHint?: boolean;
    openWorldHint?: boolean;
  };
}

/** The server could not be reached, or the connection broke: trying again may succeed. */
export class McpServerUnreachable extends Error {
  constructor(serverName: string, cause: unknown, detail?: string) {
    const why = cause instanceof Error ? cause.message : String(cause);
    super(`MCP server ${serverName} is not reachable: ${why}${detail ? ` (${detail})` : ""}`, { cause });
    this.name = "McpServerUnreachable";
  }
}

const CONNECT_TIMEOUT_MS = 30_000;
const LIST_TIMEOUT_MS = 30_000;
/** A call is bounded by its step's timeout (the signal), not by the SDK's 60 s default. */
const CALL_TIMEOUT_MS = 2 ** 31 - 1;
const CLIENT_INFO = { name: "stepwise", version: "1" };

interface OpenClient {
  client: Client;
  transport: Transport;
}

/**
 * This process's connections to MCP servers, one per server, opened on first use and kept; a
 * connection that closes or fails is forgotten, so the next use opens a new one (a step's retry
 * reconnects). A stdio server is a program started through the launcher, confined.
 */
export class McpConnections {
  private readonly open = new Map<string, Promise<OpenClient>>();

  private connect(server: McpServerRef): Promise<OpenClient> {
    const existing = this.open.get(server.id);
    if (existing) return existing;
    const opening = this.openClient(server);
    this.open.set(server.id, opening);
    opening.catch(() => {
      if (this.open.get(server.id) === opening) this.open.delete(server.id);
    });
    return opening;
  }

  private async openClient(server: McpServerRef): Promise<OpenClient> {
    const transport: Transport =
      server.connection.kind === "stdio"
        ? new LauncherStdioTransport(server.connection)
        : new StreamableHTTPClientTransport(new URL(server.connection.url), {
            requestInit: { headers: server.connection.headers },
          });
    const client = new Client(CLIENT_INFO);
    const forget = () => {
      const current = this.open.get(server.id);
      void current?.then((entry) => {
        if (entry.client === client) this.open.delete(server.id);
      });
    };
    try {
      await client.connect(transport, { timeout: CONNECT_TIMEOUT_MS });
    } catch (error) {
      await transport.close().catch(() => undefined);
      throw new McpServerUnreachable(server.name, error, stderrOf(transport));
    }
    client.onclose = forget;
    client.onerror = () => undefined;
    return { client, transport };
  }

  /** Every tool the server offers now (all pages of its list). */
  async listTools(server: McpServerRef): Promise<ListedMcpTool[]> {
    const { client, transport } = await this.connect(server);
    const tools: ListedMcpTool[] = [];
    let cursor: string | undefined;
    try {
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined, { timeout: LIST_TIMEOUT_MS });
        for (const tool of page.tools) {
          tools.push({
            name: tool.name,
            ...(tool.description !== undefined && { description: tool.description }),
            inputSchema: tool.inputSchema as Record<string, unknown>,
            ...(tool.annotations && { annotations: tool.annotations }),
          });
        }
        cursor = page.nextCursor;
      } while (cursor);
    } catch (error) {
      await this.drop(server.id);
      throw new McpServerUnreachable(server.name, error, stderrOf(transport));
    }
    return tools;
  }

  /**
   * Calls one tool. A broken connection is dropped and reported as `McpServerUnreachable` (the
   * step may be retried, which reconnects); a tool's own error result is returned as it is.
   */
  async callTool(
    server: McpServerRef,
    name: string,
    args: Record<string, unknown>,
    signal: AbortSignal,
  ): Promise<CallToolResult> {
    const { client, transport } = await this.connect(server);
    try {
      return (await client.callTool({ name, arguments: args }, undefined, {
        signal,
        timeout: CALL_TIMEOUT_MS,
      })) as CallToolResult;
    } catch (error) {
      if (signal.aborted) throw error;
      if (isProtocolError(error)) throw error;
      await this.drop(server.id);
      throw new McpServerUnreachable(server.name, error, stderrOf(transport));
    }
  }

  /** Closes the server's connection (removed, or its listing failed). */
  async drop(serverId: string): Promise<void> {
    const entry = this.open.get(serverId);
    this.open.delete(serverId);
    const opened = await entry?.catch(() => undefined);
    await opened?.client.close().catch(() => undefined);
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open.keys()].map((id) => this.drop(id)));
  }
}

/** A JSON-RPC error the server answered with (bad arguments, unknown tool): not a broken link. */
function isProtocolError(error: unknown): boolean {
  return (
    error instanceof McpError && error.code !== ErrorCode.ConnectionClosed && error.code !== ErrorCode.RequestTimeout
  );
}

function stderrOf(transport: Transport): string | undefined {
  return transport instanceof LauncherStdioTransport ? transport.stderr() || undefined : undefined;
}
