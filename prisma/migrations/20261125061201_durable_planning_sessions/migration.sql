-- AlterTable
ALTER TABLE "planning_questions" ADD COLUMN     "tool_call_id" TEXT;

-- AlterTable
ALTER TABLE "planning_sessions" ADD COLUMN     "loop_state" JSONB,
ADD COLUMN     "phase" TEXT NOT NULL DEFAULT 'queued',
ADD COLUMN     "worker_id" UUID;

-- CreateIndex
CREATE INDEX "planning_sessions_status_idx" ON "planning_sessions"("status");

-- Sessions that already ended have nothing to resume.
UPDATE "planning_sessions" SET "phase" = 'done' WHERE "status" NOT IN ('running', 'awaiting_answer');
