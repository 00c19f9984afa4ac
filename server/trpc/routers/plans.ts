import type { PlanIssue } from "../../plan-schema";
import { planApprove, planEdit, planImport, planList, planReview, planReviewStatus } from "../../operations/plans";
import { viaOperation } from "../../operations/operation";
import { planArchive, planRestore } from "../../operations/plan-lifecycle";
import { planComment, planCommentResolve, planComments, planReviseFromComments } from "../../operations/plan-comments";
import {
  planAssessments,
  planDiff,
  planExport,
  planLifecycle,
  planOverlaps,
  planTools,
  planVersions,
  planView,
} from "../../operations/plan-reads";
import { operationProcedure, operationProcedureInputOptional, router } from "../init";

/**
 * Every procedure adapts an operation (server/operations/): the authority check is theirs. Some
 * unwrap the objects operations answer with (MCP results must be objects); the types are the
 * operations' output schemas.
 */

export const plansRouter = router({
  /** Active plans by default; `show: "archived"` lists the archived and rejected ones. */
  list: operationProcedureInputOptional(planList).query(async (call) => (await viaOperation(planList)(call)).plans),
  /** Archive and restore (server/operations/plan-lifecycle.ts); reject is `review`. */
  archive: operationProcedure(planArchive).mutation(viaOperation(planArchive)),
  restore: operationProcedure(planRestore).mutation(viaOperation(planRestore)),

  /** A version with what its checks find today (a tool removed since, a workspace gone). */
  get: operationProcedure(planView).query(viaOperation(planView)),

  /**
   * Risk and capability of each step of a version, judged from its tool and command (the shell
   * read-only analysis): what the plan page shows instead of the author's claims.
   */
  assessments: operationProcedure(planAssessments).query(
    async (call) => (await viaOperation(planAssessments)(call)).assessments,
  ),

  /** Steps that may run in parallel on the same files, with the dependency that serialises each pair. */
  overlaps: operationProcedure(planOverlaps).query(async (call) => (await viaOperation(planOverlaps)(call)).overlaps),

  /** Whether a person set the plan aside: rejected (seed 002) or archived; and whether it ever ran. */
  lifecycle: operationProcedure(planLifecycle).query(viaOperation(planLifecycle)),

  createFromJson: operationProcedure(planImport).mutation(viaOperation(planImport)),

  /** A person approves exactly this version; its run starts (server/operations/plans.ts). */
  approve: operationProcedure(planApprove).mutation(viaOperation(planApprove)),
  /** Reject, or send back with instructions (seed 002); the agent reads it with plan_review_status. */
  review: operationProcedure(planReview).mutation(viaOperation(planReview)),
  reviewStatus: operationProcedure(planReviewStatus).query(viaOperation(planReviewStatus)),

  /** Review comments (server/operations/plan-comments.ts): threads per step, resolve, revise from them. */
  comments: operationProcedure(planComments).query(viaOperation(planComments)),
  comment: operationProcedure(planComment).mutation(viaOperation(planComment)),
  resolveComment: operationProcedure(planCommentResolve).mutation(viaOperation(planCommentResolve)),
  reviseFromComments: operationProcedure(planReviseFromComments).mutation(viaOperation(planReviseFromComments)),

  /** Tools with their input as JSON Schema, for the step editor's generated argument forms. */
  tools: operationProcedureInputOptional(planTools).query(async (call) => (await viaOperation(planTools)(call)).tools),

  /**
   * One edit of the review page, made on `baseVersion`. Stores the next version and returns it
   * (a stored version is always valid, hence no issues); a stale base is a `version_conflict`.
   */
  edit: operationProcedure(planEdit).mutation(async ({ ctx, input }) => {
    const plan = await viaOperation(planEdit)({ ctx, input });
    return { plan, issues: [] as PlanIssue[] };
  }),

  versions: operationProcedure(planVersions).query(async (call) => (await viaOperation(planVersions)(call)).versions),

  diff: operationProcedure(planDiff).query(viaOperation(planDiff)),

  export: operationProcedure(planExport).query(viaOperation(planExport)),
});
