-- AlterTable
ALTER TABLE "llm_calls" ADD COLUMN     "step_id" TEXT;

-- AlterTable
ALTER TABLE "recovery_proposals" ADD COLUMN     "automatic" BOOLEAN NOT NULL DEFAULT false;

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "recovery_policy" TEXT NOT NULL DEFAULT 'ask';

-- CreateTable
CREATE TABLE "plan_templates" (
    "id" UUID NOT NULL,
    "name" TEXT NOT NULL,
    "description" TEXT NOT NULL DEFAULT '',
    "goal" TEXT NOT NULL,
    "content" JSONB NOT NULL,
    "parameters" JSONB NOT NULL DEFAULT '[]',
    "source_plan_id" TEXT,
    "source_version" INTEGER,
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "plan_templates_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "plan_templates_created_at_idx" ON "plan_templates"("created_at");
