-- The workspaces (their paths) each worker serves: a step that acts in a workspace is queued for
-- the workers serving it (server/queue/jobs.ts), and a step no live worker serves is shown waiting.
ALTER TABLE "workers" ADD COLUMN "workspaces" TEXT[] DEFAULT ARRAY[]::TEXT[];
