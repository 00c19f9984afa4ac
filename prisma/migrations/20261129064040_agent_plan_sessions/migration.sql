-- The named credential that proved an agent author of a plan version (null for the shared agent
-- token or a person): an agent's plan_create plan, once approved, is that agent's to work.
ALTER TABLE "plan_versions" ADD COLUMN "author_credential" TEXT;

-- A session attached from an agent's own plan (plan_create) is bound to that author: only the
-- agent of that name under that credential takes or reports its tasks (asked of the policy at
-- each call). Other sessions stay open to any agent that names them.
ALTER TABLE "agent_sessions" ADD COLUMN "author_bound" BOOLEAN NOT NULL DEFAULT false;
ALTER TABLE "agent_sessions" ADD COLUMN "author_credential" TEXT;
