-- AlterTable
ALTER TABLE "run_steps" ADD COLUMN     "waiting" JSONB;

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "approval_timeout_ms" INTEGER NOT NULL DEFAULT 1800000,
ADD COLUMN     "approval_warning_ms" INTEGER NOT NULL DEFAULT 300000,
ADD COLUMN     "rerun_of" UUID;
