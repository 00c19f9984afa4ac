import { viaOperation } from "../../operations/operation";
import { inboxList } from "../../operations/reads";
import { operationProcedure, router } from "../init";

/** Everything waiting for a person (server/inbox/inbox.ts); the navigation polls `list` for its count. */
export const inboxRouter = router({
  list: operationProcedure(inboxList).query(viaOperation(inboxList)),
});
