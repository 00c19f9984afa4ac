import { viaOperation } from "../../operations/operation";
import { planningList, planningState } from "../../operations/reads";
import { operationProcedure, router } from "../init";

/** The Planning list: every planning session with its state in words (server/planner/session-list.ts). */
export const planningRouter = router({
  list: operationProcedure(planningList).query(viaOperation(planningList)),
  state: operationProcedure(planningState).query(viaOperation(planningState)),
});
