-- AlterTable
ALTER TABLE "approvals" ADD COLUMN     "definition_hash" TEXT;

-- CreateTable
CREATE TABLE "gate_waivers" (
    "id" BIGSERIAL NOT NULL,
    "plan_id" TEXT NOT NULL,
    "plan_version" INTEGER NOT NULL,
    "step_id" TEXT NOT NULL,
    "definition_hash" TEXT NOT NULL,
    "actor" TEXT NOT NULL,
    "created_at" TIMESTAMPTZ(3) NOT NULL DEFAULT CURRENT_TIMESTAMP,

    CONSTRAINT "gate_waivers_pkey" PRIMARY KEY ("id")
);

-- CreateIndex
CREATE INDEX "gate_waivers_plan_id_step_id_idx" ON "gate_waivers"("plan_id", "step_id");
