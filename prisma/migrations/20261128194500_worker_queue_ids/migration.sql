-- AlterTable
ALTER TABLE "workers" ADD COLUMN "queue_worker_ids" TEXT[] DEFAULT ARRAY[]::TEXT[];
