import { auditList, auditVerify } from "../../operations/audit";
import { viaOperation } from "../../operations/operation";
import { operationProcedure, router } from "../init";

/** The audit page: decisions newest first, filtered by plan, run and person, paged by cursor. */
export const auditRouter = router({
  list: operationProcedure(auditList).query(viaOperation(auditList)),
  // A mutation only so the page runs it when asked (it reads the whole log), not on every render.
  verify: operationProcedure(auditVerify).mutation(viaOperation(auditVerify)),
});
