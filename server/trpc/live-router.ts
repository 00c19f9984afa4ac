import { router } from "./init";
import { plannerRouter } from "./routers/planner";
import { runsRouter } from "./routers/runs";

/**
 * What the browser's shared live socket may call: the event subscriptions, under the same paths
 * as in the app router, and nothing else. Queries and mutations go over HTTP, through the door's
 * per-request checks; a socket that somehow got opened can only listen.
 */
export const liveRouter = router({
  runs: router({ events: runsRouter.events }),
  planner: router({ events: plannerRouter.events }),
});
