-- CreateTable
CREATE TABLE "agent_sessions" (
    "id" TEXT NOT NULL,
    "goal" TEXT NOT NULL,
    "workspace_root" TEXT NOT NULL,
    "plan_id" TEXT NOT NULL,
    "run_id" UUID NOT NULL,
    "instructions_version" TEXT,
    "paused_by_signal" BOOLEAN NOT NULL DEFAULT false,
    "final_summary" TEXT,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "closed_at" TIMESTAMPTZ(3),

    CONSTRAINT "agent_sessions_pkey" PRIMARY KEY ("id")
);

-- CreateTable
CREATE TABLE "signals" (
    "seq" BIGSERIAL NOT NULL,
    "session_id" TEXT NOT NULL,
    "key" TEXT NOT NULL,
    "task_id" INTEGER,
    "level" TEXT NOT NULL,
    "message" TEXT NOT NULL,
    "raised_by" TEXT NOT NULL,
    "raised_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "cleared_by" TEXT,
    "cleared_at" TIMESTAMPTZ(3),

    CONSTRAINT "signals_pkey" PRIMARY KEY ("seq")
);

-- CreateIndex
CREATE INDEX "agent_sessions_created_at_idx" ON "agent_sessions"("created_at");

-- CreateIndex
CREATE INDEX "agent_sessions_run_id_idx" ON "agent_sessions"("run_id");

-- CreateIndex
CREATE INDEX "signals_session_id_cleared_at_idx" ON "signals"("session_id", "cleared_at");

-- AddForeignKey
ALTER TABLE "signals" ADD CONSTRAINT "signals_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "agent_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
