-- AlterTable
ALTER TABLE "agent_sessions" ADD COLUMN     "todo_key" TEXT;

-- CreateIndex
CREATE UNIQUE INDEX "agent_sessions_todo_key_key" ON "agent_sessions"("todo_key");
