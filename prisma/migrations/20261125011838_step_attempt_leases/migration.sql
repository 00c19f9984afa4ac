-- AlterTable
ALTER TABLE "run_steps" ADD COLUMN     "lease_expires_at" TIMESTAMPTZ(3);
