import { listInbox } from "../../inbox/inbox";
import { publicProcedure, router } from "../init";

/** Everything waiting for a person (server/inbox/inbox.ts); the navigation polls `list` for its count. */
export const inboxRouter = router({
  list: publicProcedure.query(({ ctx }) => listInbox(ctx.app.db.pool, ctx.app.tools)),
});
