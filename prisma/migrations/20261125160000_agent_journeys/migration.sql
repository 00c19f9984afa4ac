-- AlterTable
ALTER TABLE "agent_sessions" ADD COLUMN     "last_seen_at" TIMESTAMPTZ(3),
ADD COLUMN     "planning_session_id" UUID;

-- AlterTable
ALTER TABLE "planning_sessions" ADD COLUMN     "last_activity_at" TIMESTAMPTZ(3);

-- CreateTable
CREATE TABLE "planning_messages" (
    "id" UUID NOT NULL,
    "session_id" UUID NOT NULL,
    "message" TEXT NOT NULL,
    "author" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "delivered_at" TIMESTAMPTZ(3),

    CONSTRAINT "planning_messages_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "planning_messages_session_id_created_at_idx" ON "planning_messages"("session_id", "created_at");

-- AddForeignKey
ALTER TABLE "planning_messages" ADD CONSTRAINT "planning_messages_session_id_fkey" FOREIGN KEY ("session_id") REFERENCES "planning_sessions"("id") ON DELETE CASCADE ON UPDATE CASCADE;
