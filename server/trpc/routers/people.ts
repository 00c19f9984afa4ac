import { viaOperation } from "../../operations/operation";
import {
  peopleAdd,
  peopleAddCredential,
  peopleList,
  peopleMe,
  peopleRevokeCredential,
  peopleSetRole,
  workspacePolicyGet,
  workspaceSetPolicy,
} from "../../operations/people";
import { operationProcedure, operationProcedureInputOptional, router } from "../init";

/** The People page, the signed-in name in the nav, and the workspace page's approver policy. */
export const peopleRouter = router({
  me: operationProcedureInputOptional(peopleMe).query(viaOperation(peopleMe)),
  list: operationProcedureInputOptional(peopleList).query(viaOperation(peopleList)),
  add: operationProcedure(peopleAdd).mutation(viaOperation(peopleAdd)),
  addCredential: operationProcedure(peopleAddCredential).mutation(viaOperation(peopleAddCredential)),
  revokeCredential: operationProcedure(peopleRevokeCredential).mutation(viaOperation(peopleRevokeCredential)),
  setRole: operationProcedure(peopleSetRole).mutation(viaOperation(peopleSetRole)),
  approverPolicy: operationProcedure(workspacePolicyGet).query(viaOperation(workspacePolicyGet)),
  setApproverPolicy: operationProcedure(workspaceSetPolicy).mutation(viaOperation(workspaceSetPolicy)),
});
