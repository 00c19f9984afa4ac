import { viaOperation } from "../../operations/operation";
import {
  workspaceForPlan,
  workspaceList,
  workspaceRegister,
  workspaceRemove,
  workspaceRename,
} from "../../operations/workspaces";
import { operationProcedure, router } from "../init";

/** The workspaces page and the workspace selects of the New task and New plan forms. */
export const workspacesRouter = router({
  list: operationProcedure(workspaceList).query(viaOperation(workspaceList)),
  register: operationProcedure(workspaceRegister).mutation(viaOperation(workspaceRegister)),
  rename: operationProcedure(workspaceRename).mutation(viaOperation(workspaceRename)),
  remove: operationProcedure(workspaceRemove).mutation(viaOperation(workspaceRemove)),
  /** The workspace a plan acts in, shown on the plan page. */
  forPlan: operationProcedure(workspaceForPlan).query(viaOperation(workspaceForPlan)),
});
