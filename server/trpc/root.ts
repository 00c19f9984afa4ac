import { createCallerFactory, router } from "./init";
import { agentsRouter } from "./routers/agents";
import { plannerRouter } from "./routers/planner";
import { plansRouter } from "./routers/plans";
import { runsRouter } from "./routers/runs";
import { templatesRouter } from "./routers/templates";

export const appRouter = router({
  plans: plansRouter,
  runs: runsRouter,
  planner: plannerRouter,
  agents: agentsRouter,
  templates: templatesRouter,
});
export type AppRouter = typeof appRouter;
export const createCaller = createCallerFactory(appRouter);
