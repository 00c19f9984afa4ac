-- AlterTable
ALTER TABLE "plan_versions" ADD COLUMN "advice" JSONB NOT NULL DEFAULT '[]';
