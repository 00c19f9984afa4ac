-- MCP servers an admin configures per workspace (server/mcp-servers/): a stdio command or a Streamable
-- HTTP URL, whose tools join the tool registry as mcp__<server>__<tool>. Rows are never deleted, so a
-- name always means one configuration.
-- CreateTable
CREATE TABLE "mcp_servers" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "workspace_id" UUID NOT NULL,
    "transport" TEXT NOT NULL,
    "command" TEXT,
    "args" TEXT[] DEFAULT ARRAY[]::TEXT[],
    "env" JSONB NOT NULL DEFAULT '{}',
    "url" TEXT,
    "headers" JSONB NOT NULL DEFAULT '{}',
    "tools" JSONB NOT NULL DEFAULT '[]',
    "status" TEXT NOT NULL DEFAULT 'unknown',
    "last_error" TEXT,
    "tool_changes" JSONB,
    "checked_at" TIMESTAMPTZ(3),
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "removed_at" TIMESTAMPTZ(3),

    CONSTRAINT "mcp_servers_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "mcp_servers_name_key" ON "mcp_servers"("name");

-- CreateIndex
CREATE INDEX "mcp_servers_workspace_id_idx" ON "mcp_servers"("workspace_id");

-- AddForeignKey
ALTER TABLE "mcp_servers" ADD CONSTRAINT "mcp_servers_workspace_id_fkey" FOREIGN KEY ("workspace_id") REFERENCES "workspaces"("id") ON DELETE RESTRICT ON UPDATE CASCADE;
