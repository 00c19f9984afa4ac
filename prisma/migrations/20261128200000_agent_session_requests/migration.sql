-- CreateTable
CREATE TABLE "agent_session_requests" (
    "plan_id" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "goal" TEXT NOT NULL,
    "workspace_root" TEXT NOT NULL,
    "created_by" TEXT NOT NULL,
    "agent_concurrency" INTEGER,
    "lease_seconds" INTEGER,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "attached_at" TIMESTAMPTZ(3),

    CONSTRAINT "agent_session_requests_pkey" PRIMARY KEY ("plan_id")
);

-- CreateIndex
CREATE UNIQUE INDEX "agent_session_requests_session_id_key" ON "agent_session_requests"("session_id");

-- CreateIndex
CREATE INDEX "agent_session_requests_created_by_created_at_idx" ON "agent_session_requests"("created_by", "created_at");

-- AddForeignKey
ALTER TABLE "agent_session_requests" ADD CONSTRAINT "agent_session_requests_plan_id_fkey" FOREIGN KEY ("plan_id") REFERENCES "plans"("id") ON DELETE CASCADE ON UPDATE CASCADE;
