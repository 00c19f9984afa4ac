-- AlterTable
ALTER TABLE "workers" ADD COLUMN     "heartbeat_ms" INTEGER NOT NULL DEFAULT 2000;
