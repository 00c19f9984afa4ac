-- Agent workspace work (a task's worktree for its hand-out, a DONE's commit, verifiers and merge,
-- worktrees made ahead) asked of a worker serving the workspace when the process answering the
-- agent serves none (server/agents/workspace-calls.ts). The row holds what was asked, by ids, and
-- what came of it, and which worker did it.
CREATE TABLE "agent_workspace_calls" (
    "id" UUID NOT NULL DEFAULT gen_random_uuid(),
    "kind" TEXT NOT NULL,
    "workspace_root" TEXT NOT NULL,
    "session_id" TEXT NOT NULL,
    "run_id" UUID NOT NULL,
    "step_id" TEXT,
    "input" JSONB NOT NULL DEFAULT '{}',
    "result" JSONB,
    "error" JSONB,
    "worker_id" UUID,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "started_at" TIMESTAMPTZ(3),
    "finished_at" TIMESTAMPTZ(3),

    CONSTRAINT "agent_workspace_calls_pkey" PRIMARY KEY ("id")
);

CREATE INDEX "agent_workspace_calls_created_at_idx" ON "agent_workspace_calls"("created_at");
