-- AlterTable
ALTER TABLE "agent_sessions" ADD COLUMN     "agent_concurrency" INTEGER NOT NULL DEFAULT 3,
ADD COLUMN     "lease_seconds" INTEGER NOT NULL DEFAULT 600;

-- CreateTable
CREATE TABLE "agent_task_leases" (
    "session_id" TEXT NOT NULL,
    "step_id" TEXT NOT NULL,
    "run_id" UUID NOT NULL,
    "agent" TEXT NOT NULL,
    "leased_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "brief" JSONB NOT NULL,

    CONSTRAINT "agent_task_leases_pkey" PRIMARY KEY ("session_id","step_id")
);

-- CreateTable
CREATE TABLE "session_agents" (
    "session_id" TEXT NOT NULL,
    "agent" TEXT NOT NULL,
    "first_seen_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "last_seen_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "session_agents_pkey" PRIMARY KEY ("session_id","agent")
);

-- CreateIndex
CREATE INDEX "agent_task_leases_session_id_agent_idx" ON "agent_task_leases"("session_id", "agent");

-- AddForeignKey
ALTER TABLE "agent_task_leases" ADD CONSTRAINT "agent_task_leases_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "agent_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;

-- AddForeignKey
ALTER TABLE "session_agents" ADD CONSTRAINT "session_agents_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "agent_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
