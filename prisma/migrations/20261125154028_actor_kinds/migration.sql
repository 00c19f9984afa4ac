-- AlterTable
ALTER TABLE "approvals" ADD COLUMN     "actor_kind" TEXT;

-- AlterTable
ALTER TABLE "audit_entries" ADD COLUMN     "actor_kind" TEXT;

-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "paused_by_kind" TEXT;
