import { createCallerFactory, router } from "./init";
import { plansRouter } from "./routers/plans";
import { runsRouter } from "./routers/runs";

export const appRouter = router({ plans: plansRouter, runs: runsRouter });
export type AppRouter = typeof appRouter;
export const createCaller = createCallerFactory(appRouter);
