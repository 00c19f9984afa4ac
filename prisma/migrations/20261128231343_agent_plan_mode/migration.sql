-- Plan mode belongs to the agent (its name under the credential that proved it), not to one MCP
-- connection: every connection and the CLI of that agent look its planning session up here, so the
-- restriction survives a restart. `plan_mode_left_at`: the agent left plan mode (exit_plan_mode)
-- while its submitted plan still waits for review.
ALTER TABLE "planning_sessions" ADD COLUMN "actor_credential" TEXT;
ALTER TABLE "planning_sessions" ADD COLUMN "plan_mode_left_at" TIMESTAMPTZ(3);
CREATE INDEX "planning_sessions_actor_created_at_idx" ON "planning_sessions"("actor", "created_at");

-- A todo plan keyed by its MCP connection (seed 000) names that connection here: after a restart
-- the same agent's new connection resumes it, or the idle sweep ends its run with the reason.
ALTER TABLE "agent_sessions" ADD COLUMN "todo_mcp_session" TEXT;
CREATE INDEX "agent_sessions_todo_mcp_session_idx" ON "agent_sessions"("todo_mcp_session");
