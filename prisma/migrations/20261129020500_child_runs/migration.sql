-- Sub-plans: a run started by a `run_plan` step of another run names its parent
-- (server/engine/child-runs.ts).
ALTER TABLE "runs" ADD COLUMN "parent_run_id" UUID;
ALTER TABLE "runs" ADD COLUMN "parent_step_id" TEXT;

-- One child run per parent step: starting it again (a job run twice) finds the one there is.
CREATE UNIQUE INDEX "runs_parent_run_id_parent_step_id_key" ON "runs"("parent_run_id", "parent_step_id");
