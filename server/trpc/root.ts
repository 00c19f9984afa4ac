import { createCallerFactory, router } from "./init";
import { agentsRouter } from "./routers/agents";
import { auditRouter } from "./routers/audit";
import { inboxRouter } from "./routers/inbox";
import { mcpServersRouter } from "./routers/mcp-servers";
import { peopleRouter } from "./routers/people";
import { plannerRouter } from "./routers/planner";
import { planningRouter } from "./routers/planning";
import { plansRouter } from "./routers/plans";
import { runsRouter } from "./routers/runs";
import { templatesRouter } from "./routers/templates";
import { webhooksRouter } from "./routers/webhooks";
import { workspacesRouter } from "./routers/workspaces";

export const appRouter = router({
  plans: plansRouter,
  runs: runsRouter,
  planner: plannerRouter,
  agents: agentsRouter,
  workspaces: workspacesRouter,
  audit: auditRouter,
  planning: planningRouter,
  inbox: inboxRouter,
  templates: templatesRouter,
  people: peopleRouter,
  webhooks: webhooksRouter,
  mcpServers: mcpServersRouter,
});
export type AppRouter = typeof appRouter;
export const createCaller = createCallerFactory(appRouter);
