import { auditList } from "../../operations/audit";
import { viaOperation } from "../../operations/operation";
import { operationProcedure, router } from "../init";

/** The audit page: decisions newest first, filtered by plan, run and person, paged by cursor. */
export const auditRouter = router({
  list: operationProcedure(auditList).query(viaOperation(auditList)),
});
