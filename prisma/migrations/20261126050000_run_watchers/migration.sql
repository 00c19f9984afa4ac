-- AlterTable
ALTER TABLE "runs" ADD COLUMN "watched_until" TIMESTAMPTZ(3);
