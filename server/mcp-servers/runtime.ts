import type pg from "pg";
import type { z } from "zod";
import { logger } from "../logger";
import { McpConnections } from "../tools/mcp-client";
import {
  MCP_TOOL_NAME,
  mcpToolDefinition,
  parseMcpToolName,
  type McpRuntime,
  type McpServerChecks,
} from "../tools/mcp-tool";
import { isExtensible, type ServerToolSet, type ToolRegistry } from "../tools/registry";
import {
  connectionOf,
  insertMcpServer,
  markMcpServerRemoved,
  readMcpServer,
  readMcpServers,
  recordMcpServerRefresh,
  toMcpServerView,
  type addMcpServerInput,
  type McpServerRow,
  type McpServerView,
  type RefreshResult,
} from "./store";

const log = logger.child({ component: "mcp-servers" });

/** The MCP runtime of one process over `registry` (which takes the servers' tools if it can). */
export function createMcpRuntime(pool: pg.Pool, registry: ToolRegistry): McpRuntime {
  const connections = new McpConnections();
  const checks: McpServerChecks = {
    stillConfigured: async (serverId) =>
      ((await pool.query("select 1 from mcp_servers where id = $1 and removed_at is null", [serverId])).rowCount ?? 0) >
      0,
    async markDown(serverId, error) {
      await pool.query("update mcp_servers set status = 'down', last_error = $2, checked_at = now() where id = $1", [
        serverId,
        error,
      ]);
    },
  };
  let known = new Set<string>();
  return {
    connections,
    async reload() {
      const rows = await readMcpServers(pool, { removed: true });
      if (isExtensible(registry)) registry.setServerTools(serverToolSet(rows, connections, checks));
      // Connections of servers removed since the last read are closed (their programs end).
      const live = new Set(rows.filter((row) => !row.removed_at).map((row) => row.id));
      for (const id of known) if (!live.has(id)) await connections.drop(id);
      known = live;
    },
    close: () => connections.closeAll(),
  };
}

/** The registry's view of the servers: each live server's listed tools, and why a name is missing. */
export function serverToolSet(
  rows: McpServerRow[],
  connections: McpConnections,
  checks: McpServerChecks,
): ServerToolSet {
  const live = rows.filter((row) => !row.removed_at);
  const tools = live.flatMap((row) =>
    row.tools.map((tool) =>
      mcpToolDefinition(
        { id: row.id, name: row.name, connection: connectionOf(row), workspaceRoot: row.workspace_path },
        tool,
        connections,
        checks,
      ),
    ),
  );
  const byName = new Map(rows.map((row) => [row.name, row]));
  return {
    tools,
    missingReason(name) {
      const parsed = parseMcpToolName(name);
      if (!parsed) return undefined;
      const row = byName.get(parsed.server);
      if (!row) return `tool ${name}: no MCP server named ${parsed.server} is configured`;
      if (row.removed_at) return `tool ${name}: MCP server ${parsed.server} was removed`;
      const offered = row.tools.map((tool) => tool.name).join(", ") || "no tools";
      const was = row.tool_changes?.removed.includes(parsed.tool) ? "is no longer offered" : "is not offered";
      return `tool ${name} ${was} by server ${parsed.server} (it offers: ${offered})`;
    },
  };
}

/** Connects (afresh) and lists the server's tools; a server that cannot be reached says why. */
async function listAgain(connections: McpConnections, row: McpServerRow): Promise<RefreshResult> {
  const server = { id: row.id, name: row.name, connection: connectionOf(row) };
  await connections.drop(row.id);
  try {
    const listed = await connections.listTools(server);
    const usable = listed.filter((tool) => MCP_TOOL_NAME.test(tool.name));
    const skipped = listed.filter((tool) => !MCP_TOOL_NAME.test(tool.name)).map((tool) => tool.name);
    return { ok: true, tools: usable, skipped };
  } catch (error) {
    log.warn({ server: row.name, err: error }, "MCP server could not be listed");
    return { ok: false, error: error instanceof Error ? error.message : String(error) };
  }
}

/** Lists a server's tools again and stores what it found (status, error, the list and its changes). */
export async function refreshMcpServer(
  pool: pg.Pool,
  runtime: McpRuntime,
  actor: string,
  id: string,
): Promise<McpServerView> {
  const row = await readMcpServer(pool, id);
  await recordMcpServerRefresh(pool, actor, row, await listAgain(runtime.connections, row));
  await runtime.reload();
  return toMcpServerView(await readMcpServer(pool, id));
}

/** Adds a server and lists its tools at once; one that cannot be reached is kept, shown down. */
export async function addMcpServer(
  pool: pg.Pool,
  runtime: McpRuntime,
  actor: string,
  input: z.output<typeof addMcpServerInput>,
  defaultRoot: string,
): Promise<McpServerView> {
  const id = await insertMcpServer(pool, actor, input, defaultRoot);
  return refreshMcpServer(pool, runtime, actor, id);
}

export async function removeMcpServer(pool: pg.Pool, runtime: McpRuntime, actor: string, id: string): Promise<void> {
  await markMcpServerRemoved(pool, actor, id);
  await runtime.connections.drop(id);
  await runtime.reload();
}

export async function listMcpServers(pool: pg.Pool): Promise<McpServerView[]> {
  return (await readMcpServers(pool)).map(toMcpServerView);
}
