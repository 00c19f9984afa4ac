import { createCallerFactory, router } from "./init";
import { agentsRouter } from "./routers/agents";
import { plannerRouter } from "./routers/planner";
import { plansRouter } from "./routers/plans";
import { runsRouter } from "./routers/runs";

export const appRouter = router({ plans: plansRouter, runs: runsRouter, planner: plannerRouter, agents: agentsRouter });
export type AppRouter = typeof appRouter;
export const createCaller = createCallerFactory(appRouter);
