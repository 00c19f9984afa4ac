-- AlterTable
ALTER TABLE "runs" ADD COLUMN     "approval_note" TEXT;

-- CreateTable
CREATE TABLE "decision_links" (
    "id" UUID NOT NULL,
    "token_hash" TEXT NOT NULL,
    "run_id" UUID NOT NULL,
    "step_id" TEXT NOT NULL,
    "definition_hash" TEXT NOT NULL,
    "decisions" TEXT[],
    "created_by" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "expires_at" TIMESTAMPTZ(3) NOT NULL,
    "used_at" TIMESTAMPTZ(3),
    "used_decision" TEXT,

    CONSTRAINT "decision_links_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE UNIQUE INDEX "decision_links_token_hash_key" ON "decision_links"("token_hash");

-- CreateIndex
CREATE INDEX "decision_links_run_id_step_id_idx" ON "decision_links"("run_id", "step_id");
