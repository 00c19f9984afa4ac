-- CreateTable
CREATE TABLE "mcp_sessions" (
    "id" TEXT NOT NULL,
    "identity_kind" TEXT NOT NULL,
    "identity_name" TEXT NOT NULL,
    "token_id" TEXT,
    "credential" TEXT NOT NULL,
    "initialize" JSONB NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "closed_at" TIMESTAMPTZ(3),
    "closed_reason" TEXT,

    CONSTRAINT "mcp_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "mcp_sessions_credential_last_seen_at_idx" ON "mcp_sessions"("credential", "last_seen_at");
