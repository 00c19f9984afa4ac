import type { PlanDiff } from "../../plans/diff";
import type { PlanExport, ToolDescription } from "../../plans/export";
import type { PlanLifecycleState } from "../../plans/lifecycle";
import type { Plan } from "../../plan-schema";
import type { listPlans } from "../../plans/service";
import type { checkPlanDraft } from "../../plans/validate";
import type { listPlanVersions } from "../../plans/versions";
import type { StepAssessment } from "../../tools/assessment";
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

type PlanIssues = ReturnType<typeof checkPlanDraft>["issues"];

/**
 * Every procedure adapts an operation (server/operations/): the authority check is theirs. The
 * casts keep the domain's own types for the UI where an operation's output schema lets them
 * through loosely, and unwrap the objects operations answer with (MCP results must be objects).
 */

export const plansRouter = router({
  /** Active plans by default; `show: "archived"` lists the archived and rejected ones. */
  list: operationProcedureInputOptional(planList).query(
    async (call) =>
      ((await viaOperation(planList)(call)) as unknown as { plans: Awaited<ReturnType<typeof listPlans>> }).plans,
  ),
  /** Archive and restore (server/operations/plan-lifecycle.ts); reject is `review`. */
  archive: operationProcedure(planArchive).mutation(viaOperation(planArchive)),
  restore: operationProcedure(planRestore).mutation(viaOperation(planRestore)),

  /** A version with what its checks find today (a tool removed since, a workspace gone). */
  get: operationProcedure(planView).query(
    async (call) => (await viaOperation(planView)(call)) as unknown as { plan: Plan; issues: PlanIssues },
  ),

  /**
   * Risk and capability of each step of a version, judged from its tool and command (the shell
   * read-only analysis): what the plan page shows instead of the author's claims.
   */
  assessments: operationProcedure(planAssessments).query(
    async (call) =>
      ((await viaOperation(planAssessments)(call)) as unknown as { assessments: Record<string, StepAssessment> })
        .assessments,
  ),

  /** Steps that may run in parallel on the same files, with the dependency that serialises each pair. */
  overlaps: operationProcedure(planOverlaps).query(async (call) => (await viaOperation(planOverlaps)(call)).overlaps),

  /** Whether a person set the plan aside: rejected (seed 002) or archived; and whether it ever ran. */
  lifecycle: operationProcedure(planLifecycle).query(
    async (call) =>
      (await viaOperation(planLifecycle)(call)) as unknown as {
        state: PlanLifecycleState;
        rejectedVersion: number | null;
        archivedAt: string | null;
        runs: number;
      },
  ),

  createFromJson: operationProcedure(planImport).mutation(
    async (call) => (await viaOperation(planImport)(call)) as unknown as Plan,
  ),

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
  tools: operationProcedureInputOptional(planTools).query(
    async (call) => ((await viaOperation(planTools)(call)) as unknown as { tools: ToolDescription[] }).tools,
  ),

  /**
   * One edit of the review page, made on `baseVersion`. Stores the next version and returns it
   * (a stored version is always valid, hence no issues); a stale base is a `version_conflict`.
   */
  edit: operationProcedure(planEdit).mutation(async ({ ctx, input }) => {
    const plan = (await viaOperation(planEdit)({ ctx, input })) as unknown as Plan;
    return { plan, issues: [] as PlanIssues };
  }),

  versions: operationProcedure(planVersions).query(
    async (call) =>
      (
        (await viaOperation(planVersions)(call)) as unknown as {
          versions: Awaited<ReturnType<typeof listPlanVersions>>;
        }
      ).versions,
  ),

  diff: operationProcedure(planDiff).query(async (call) => (await viaOperation(planDiff)(call)) as unknown as PlanDiff),

  export: operationProcedure(planExport).query(
    async (call) => (await viaOperation(planExport)(call)) as unknown as PlanExport,
  ),
});
