-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "workspace_id" UUID;

-- AlterTable
ALTER TABLE "workspaces" ADD COLUMN     "removed_at" TIMESTAMPTZ(3);

-- CreateIndex
CREATE INDEX "audit_entries_plan_id_id_idx" ON "audit_entries"("plan_id", "id");

-- CreateIndex
CREATE INDEX "audit_entries_run_id_id_idx" ON "audit_entries"("run_id", "id");

-- CreateIndex
CREATE INDEX "audit_entries_actor_id_idx" ON "audit_entries"("actor", "id");
