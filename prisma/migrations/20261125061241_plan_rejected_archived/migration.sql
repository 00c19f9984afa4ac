-- AlterTable
ALTER TABLE "plans" ADD COLUMN     "archived_at" TIMESTAMPTZ(3),
ADD COLUMN     "rejected_at" TIMESTAMPTZ(3),
ADD COLUMN     "rejected_version" INTEGER;
