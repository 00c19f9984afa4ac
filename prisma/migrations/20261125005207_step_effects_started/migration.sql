-- AlterTable
ALTER TABLE "run_steps" ADD COLUMN     "effects_started_at" TIMESTAMPTZ(3);
