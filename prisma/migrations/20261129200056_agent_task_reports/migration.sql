-- An agent task reported DONE whose commit, verifiers and merge run off the agent's call, on a
-- worker serving the workspace (server/agents/task-reports.ts): the row is the report until its
-- outcome is recorded.
-- CreateTable
CREATE TABLE "agent_task_reports" (
    "session_id" TEXT NOT NULL,
    "step_id" TEXT NOT NULL,
    "run_id" UUID NOT NULL,
    "actor" TEXT NOT NULL,
    "actor_kind" TEXT NOT NULL,
    "credential" TEXT,
    "operation" JSONB NOT NULL,
    "note" TEXT,
    "items" JSONB,
    "attempts" INTEGER NOT NULL DEFAULT 0,
    "reported_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "agent_task_reports_pkey" PRIMARY KEY ("session_id","step_id")
);

-- AddForeignKey
ALTER TABLE "agent_task_reports" ADD CONSTRAINT "agent_task_reports_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "agent_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
