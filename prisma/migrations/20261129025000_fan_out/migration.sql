-- Fan-out: a step runs once per element of an earlier step's list. Each instance is a step row of
-- the run, naming its template and holding its element, and the template counts its group.
ALTER TABLE "run_steps" ADD COLUMN "template_id" TEXT;
ALTER TABLE "run_steps" ADD COLUMN "item" JSONB;
ALTER TABLE "run_steps" ADD COLUMN "group_size" INTEGER;
ALTER TABLE "runs" ADD COLUMN "fan_out_instances" INTEGER NOT NULL DEFAULT 0;
