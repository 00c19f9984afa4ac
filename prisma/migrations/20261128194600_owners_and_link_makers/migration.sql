-- AlterTable
ALTER TABLE "decision_links" ADD COLUMN     "maker_credential_id" UUID;

-- AlterTable
ALTER TABLE "plan_templates" ADD COLUMN     "created_by_kind" TEXT NOT NULL DEFAULT 'person';
