import type pg from "pg";
import { z } from "zod";
import { recordAudit } from "../audit/audit-log";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { requireWorkspace, defaultWorkspace } from "../plans/workspaces";
import type { ListedMcpTool, McpServerConnection } from "../tools/mcp-client";
import { MCP_SERVER_NAME, mcpToolName, mcpToolRisk } from "../tools/mcp-tool";
import { MCP_SERVER_STATUSES, type McpServerStatus } from "../vocabulary";

/**
 * MCP servers an admin configures per workspace: a stdio program (command, arguments, the whole
 * environment it gets) or a Streamable HTTP URL (with headers, e.g. a bearer token). Environment
 * and header values are secrets, stored as webhook secrets are and never returned: views show
 * their names only. A server's connection is fixed when added — change it by adding another
 * server — and a removed server keeps its row and its name, so `mcp__<name>__<tool>` always
 * means one configuration (docs/decisions.md, "Tools from configured MCP servers").
 */

const variableName = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]{0,99}$/, "A variable name: letters, digits and _");
const headerName = z.string().regex(/^[A-Za-z0-9-]{1,100}$/, "A header name: letters, digits and -");
const value = z.string().max(4_000);

export const addMcpServerInput = z
  .object({
    name: z
      .string()
      .trim()
      .regex(
        MCP_SERVER_NAME,
        "A server name is 1–32 lower-case letters, digits and -, starting with a letter or digit",
      ),
    workspaceId: z.uuid().optional().describe("The workspace it serves (default: the default workspace)"),
    transport: z.enum(["stdio", "http"]),
    command: z
      .string()
      .trim()
      .min(1)
      .max(1_000)
      .optional()
      .describe("stdio: the program, e.g. node or /usr/bin/python3"),
    args: z.array(z.string().max(4_000)).max(100).default([]),
    env: z.record(variableName, value).default({}).describe("stdio: the whole environment the program sees"),
    url: z
      .url({ protocol: /^https?$/ })
      .max(2_000)
      .optional()
      .describe("http: the Streamable HTTP endpoint"),
    headers: z.record(headerName, value).default({}).describe("http: sent with every request, e.g. Authorization"),
  })
  .superRefine((input, context) => {
    if (input.transport === "stdio" && !input.command) {
      context.addIssue({ code: "custom", path: ["command"], message: "A stdio server needs the command to start it" });
    }
    if (input.transport === "http" && !input.url) {
      context.addIssue({ code: "custom", path: ["url"], message: "An HTTP server needs its URL" });
    }
    const stdioFields = { command: input.command, args: input.args.length > 0, env: Object.keys(input.env).length > 0 };
    const foreign =
      input.transport === "stdio" ? { url: input.url, headers: Object.keys(input.headers).length > 0 } : stdioFields;
    for (const [field, present] of Object.entries(foreign)) {
      if (present) {
        context.addIssue({ code: "custom", path: [field], message: `A ${input.transport} server takes no ${field}` });
      }
    }
  });

const toolView = z.object({
  name: z.string().describe("The name steps use: mcp__<server>__<tool>"),
  serverTool: z.string(),
  description: z.string(),
  readOnly: z.boolean(),
  destructive: z.boolean(),
  requiresApproval: z.boolean(),
});

export const mcpServerViewSchema = z.object({
  id: z.string(),
  name: z.string(),
  workspaceId: z.string(),
  workspacePath: z.string(),
  transport: z.enum(["stdio", "http"]),
  command: z.string().nullable(),
  args: z.array(z.string()),
  envNames: z.array(z.string()).describe("The environment's variable names; values are never shown"),
  url: z.string().nullable(),
  headerNames: z.array(z.string()).describe("Header names; values are never shown"),
  status: z.enum(MCP_SERVER_STATUSES),
  lastError: z.string().nullable(),
  toolChanges: z.object({ added: z.array(z.string()), removed: z.array(z.string()) }).nullable(),
  checkedAt: z.string().nullable(),
  tools: z.array(toolView),
  createdBy: z.string(),
  createdAt: z.string(),
});
export type McpServerView = z.infer<typeof mcpServerViewSchema>;

export interface McpServerRow {
  id: string;
  name: string;
  workspace_id: string;
  workspace_path: string;
  transport: "stdio" | "http";
  command: string | null;
  args: string[];
  env: Record<string, string>;
  url: string | null;
  headers: Record<string, string>;
  tools: ListedMcpTool[];
  status: McpServerStatus;
  last_error: string | null;
  tool_changes: { added: string[]; removed: string[] } | null;
  checked_at: Date | null;
  created_by: string;
  created_at: Date;
  removed_at: Date | null;
}

type Queryable = Pick<pg.ClientBase, "query">;

const SELECT = `select s.*, w.path as workspace_path from mcp_servers s join workspaces w on w.id = s.workspace_id`;

/** Configured servers that were not removed (with `removed`, those too), by name. */
export async function readMcpServers(db: Queryable, options: { removed?: boolean } = {}): Promise<McpServerRow[]> {
  const rows = await db.query<McpServerRow>(
    `${SELECT} ${options.removed ? "" : "where s.removed_at is null"} order by s.name`,
  );
  return rows.rows;
}

export async function readMcpServer(db: Queryable, id: string): Promise<McpServerRow> {
  const row = await db.query<McpServerRow>(`${SELECT} where s.id = $1 and s.removed_at is null`, [id]);
  if (!row.rows[0]) throw new AppError("not_found", `No MCP server ${id}`);
  return row.rows[0];
}

export function connectionOf(row: McpServerRow): McpServerConnection {
  return row.transport === "stdio"
    ? { kind: "stdio", command: row.command!, args: row.args, env: row.env, workspaceRoot: row.workspace_path }
    : { kind: "http", url: row.url!, headers: row.headers };
}

export function toMcpServerView(row: McpServerRow): McpServerView {
  return {
    id: row.id,
    name: row.name,
    workspaceId: row.workspace_id,
    workspacePath: row.workspace_path,
    transport: row.transport,
    command: row.command,
    args: row.args,
    envNames: Object.keys(row.env).sort(),
    url: row.url,
    headerNames: Object.keys(row.headers).sort(),
    status: row.status,
    lastError: row.last_error,
    toolChanges: row.tool_changes,
    checkedAt: row.checked_at?.toISOString() ?? null,
    tools: row.tools.map((tool) => ({
      name: mcpToolName(row.name, tool.name),
      serverTool: tool.name,
      description: tool.description ?? "",
      ...pick(mcpToolRisk(tool.annotations)),
    })),
    createdBy: row.created_by,
    createdAt: row.created_at.toISOString(),
  };
}

const pick = ({ readOnly, destructive, requiresApproval }: ReturnType<typeof mcpToolRisk>) => ({
  readOnly,
  destructive,
  requiresApproval,
});

/** The audit log's subject for a server (entries outside plans are keyed `<kind>:<id>`). */
export const mcpServerAuditId = (id: string) => `mcp_server:${id}`;

/** Adds a server (not yet reached: `refreshMcpServer` lists its tools). */
export async function insertMcpServer(
  pool: pg.Pool,
  actor: string,
  input: z.output<typeof addMcpServerInput>,
  defaultRoot: string,
): Promise<string> {
  const workspace = input.workspaceId
    ? await requireWorkspace(pool, input.workspaceId)
    : await defaultWorkspace(pool, defaultRoot);
  return inTransaction(pool, async (client) => {
    const taken = await client.query<{ removed_at: Date | null }>(
      "select removed_at from mcp_servers where name = $1",
      [input.name],
    );
    if (taken.rows[0]) {
      throw new AppError(
        "invalid_input",
        taken.rows[0].removed_at
          ? `The name ${input.name} belonged to a removed MCP server and is not reused (approvals name its tools); choose another`
          : `An MCP server named ${input.name} is already configured`,
      );
    }
    const inserted = await client.query<{ id: string }>(
      `insert into mcp_servers (id, name, workspace_id, transport, command, args, env, url, headers, created_by)
       values (gen_random_uuid(), $1, $2, $3, $4, $5, $6, $7, $8, $9) returning id`,
      [
        input.name,
        workspace.id,
        input.transport,
        input.command ?? null,
        input.args,
        JSON.stringify(input.env),
        input.url ?? null,
        JSON.stringify(input.headers),
        actor,
      ],
    );
    const id = inserted.rows[0]!.id;
    await recordAudit(client, {
      actor,
      action: "mcp_server.added",
      planId: mcpServerAuditId(id),
      // What it runs or reaches, never an environment or header value.
      detail: {
        name: input.name,
        workspace: workspace.path,
        transport: input.transport,
        ...(input.command && { command: input.command, args: input.args }),
        ...(input.url && { origin: new URL(input.url).origin }),
        envNames: Object.keys(input.env).sort(),
        headerNames: Object.keys(input.headers).sort(),
      },
    });
    return id;
  });
}

export async function markMcpServerRemoved(pool: pg.Pool, actor: string, id: string): Promise<McpServerRow> {
  return inTransaction(pool, async (client) => {
    const row = await readMcpServer(client, id);
    await client.query("update mcp_servers set removed_at = now() where id = $1", [id]);
    await recordAudit(client, {
      actor,
      action: "mcp_server.removed",
      planId: mcpServerAuditId(id),
      detail: { name: row.name },
    });
    return row;
  });
}

/** What a refresh found: the tools now offered, or why the server could not be reached. */
export type RefreshResult = { ok: true; tools: ListedMcpTool[]; skipped: string[] } | { ok: false; error: string };

/** Stores a refresh's result; a changed tool list is recorded with what came and went. */
export async function recordMcpServerRefresh(
  pool: pg.Pool,
  actor: string,
  row: McpServerRow,
  result: RefreshResult,
): Promise<void> {
  const before = new Set(row.tools.map((tool) => tool.name));
  const after = result.ok ? new Set(result.tools.map((tool) => tool.name)) : before;
  const changes = {
    added: [...after].filter((name) => !before.has(name)).sort(),
    removed: [...before].filter((name) => !after.has(name)).sort(),
  };
  const changed = changes.added.length > 0 || changes.removed.length > 0;
  const status: McpServerStatus = result.ok ? "ok" : "down";
  const lastError = result.ok
    ? result.skipped.length > 0
      ? `Tools left out (names Stepwise cannot use): ${result.skipped.join(", ")}`
      : null
    : result.error;
  await inTransaction(pool, async (client) => {
    await client.query(
      `update mcp_servers set status = $2, last_error = $3, checked_at = now(),
              tools = coalesce($4::jsonb, tools), tool_changes = case when $5 then $6::jsonb else tool_changes end
        where id = $1`,
      [row.id, status, lastError, result.ok ? JSON.stringify(result.tools) : null, changed, JSON.stringify(changes)],
    );
    await recordAudit(client, {
      actor,
      action: "mcp_server.refreshed",
      planId: mcpServerAuditId(row.id),
      detail: { name: row.name, status, ...(changed && changes), ...(lastError && { error: lastError }) },
    });
  });
}
