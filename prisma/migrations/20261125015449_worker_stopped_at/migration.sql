-- AlterTable
ALTER TABLE "workers" ADD COLUMN     "stopped_at" TIMESTAMPTZ(3);
