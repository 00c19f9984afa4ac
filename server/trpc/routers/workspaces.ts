import { z } from "zod";
import { describePlanWorkspace } from "../../plans/workspaces";
import { viaOperation } from "../../operations/operation";
import { workspaceList, workspaceRegister, workspaceRemove, workspaceRename } from "../../operations/workspaces";
import { publicProcedure, router } from "../init";

/** The workspaces page and the workspace selects of the New task and New plan forms. */
export const workspacesRouter = router({
  list: publicProcedure.input(workspaceList.input).query(viaOperation(workspaceList)),
  register: publicProcedure.input(workspaceRegister.input).mutation(viaOperation(workspaceRegister)),
  rename: publicProcedure.input(workspaceRename.input).mutation(viaOperation(workspaceRename)),
  remove: publicProcedure.input(workspaceRemove.input).mutation(viaOperation(workspaceRemove)),
  /** The workspace a plan acts in, shown on the plan page. */
  forPlan: publicProcedure
    .input(z.object({ planId: z.string().min(1).max(100) }))
    .query(({ ctx, input }) => describePlanWorkspace(ctx.app.db.pool, input.planId, ctx.app.workspaceRoot)),
});
