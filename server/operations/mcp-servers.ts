import { z } from "zod";
import { addMcpServer, listMcpServers, refreshMcpServer, removeMcpServer } from "../mcp-servers/runtime";
import { addMcpServerInput, mcpServerViewSchema } from "../mcp-servers/store";
import { defineOperation } from "./operation";
import { PERSON_ONLY } from "./policy";
import type { AnyOperation } from "./operation";

/**
 * MCP servers whose tools plans may use (server/mcp-servers/). Person-only, and changes are an
 * admin's: a server is a program Stepwise starts (confined) or a service it calls with the
 * person's credentials, and its tools join every planner's and plan author's list.
 */
const id = z.uuid();

export const mcpServerAdd = defineOperation({
  name: "mcpServer.add",
  callers: PERSON_ONLY,
  role: "admin",
  summary:
    "Configure an MCP server for a workspace (a stdio command or a Streamable HTTP URL); its tools join the registry as mcp__<server>__<tool>",
  input: addMcpServerInput,
  output: z.object({ server: mcpServerViewSchema }),
  async run({ app, identity }, input) {
    return { server: await addMcpServer(app.db.pool, app.mcp, identity.name, input, app.workspaceRoot) };
  },
});

export const mcpServerList = defineOperation({
  name: "mcpServer.list",
  callers: PERSON_ONLY,
  role: "viewer",
  summary:
    "The configured MCP servers with their status, last error and tools (environment and header values left out)",
  input: z.object({}),
  output: z.object({ servers: z.array(mcpServerViewSchema) }),
  annotations: { readOnly: true },
  async run({ app }) {
    return { servers: await listMcpServers(app.db.pool) };
  },
});

export const mcpServerRefresh = defineOperation({
  name: "mcpServer.refresh",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Connect to an MCP server again and list its tools; a tool it no longer offers leaves the registry",
  input: z.object({ id }),
  output: z.object({ server: mcpServerViewSchema }),
  annotations: { idempotent: true },
  async run({ app, identity }, input) {
    return { server: await refreshMcpServer(app.db.pool, app.mcp, identity.name, input.id) };
  },
});

export const mcpServerRemove = defineOperation({
  name: "mcpServer.remove",
  callers: PERSON_ONLY,
  role: "admin",
  summary: "Remove an MCP server: its tools leave the registry and its name is not reused",
  input: z.object({ id }),
  output: z.object({ removed: z.literal(true) }),
  annotations: { destructive: true },
  async run({ app, identity }, input) {
    await removeMcpServer(app.db.pool, app.mcp, identity.name, input.id);
    return { removed: true as const };
  },
});

export const mcpServerOperations: AnyOperation[] = [mcpServerAdd, mcpServerList, mcpServerRefresh, mcpServerRemove];
