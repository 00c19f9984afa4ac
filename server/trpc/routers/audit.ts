import { auditList } from "../../operations/audit";
import { viaOperation } from "../../operations/operation";
import { publicProcedure, router } from "../init";

/** The audit page: decisions newest first, filtered by plan, run and person, paged by cursor. */
export const auditRouter = router({
  list: publicProcedure.input(auditList.input).query(viaOperation(auditList)),
});
