import { z } from "zod";
import { recordAudit } from "../audit/audit-log";
import { startRun } from "../engine/engine";
import { editPlan, planEditSchema } from "../plans/edits";
import { exportPlanMarkdown } from "../plans/export";
import { MAX_PLAN_JSON_BYTES, parsePlanJson } from "../plans/import";
import { PLAN_SOURCES } from "../vocabulary";
import { createPlan, getPlan, listPlans, planSummarySchema } from "../plans/service";
import { requireWorkspace, workspaceForPlan } from "../plans/workspaces";
import { planSchema, type PlanIssue } from "../plan-schema";
import { attachApprovedPlan, attachAuthorsPlan } from "../agents/attach-approved-plan";
import { attachRequestedSession } from "../agents/session-requests";
import { adoptIntoSessionRun } from "../agents/sessions";
import { AppError } from "../errors";
import { rejectPlan } from "../planner/plan-rejection";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { principalOf } from "../policy/authority";
import { ACTIVE_RUN_STATUSES } from "../vocabulary";
import { defineOperation, type OperationContext } from "./operation";
import type { AnyOperation } from "./operation";
import { loadReviewFacts, reviewStateOf } from "../planner/review-state";

/**
 * Plans as operations: create, read, list, edit, and approve (a person's act, which starts a run).
 * Output schemas describe the fields callers rely on and let the rest through.
 */
const planId = z.string().min(1).max(100);
const version = z.number().int().positive();
/** A note given with an approval (trimmed; empty means none). */
export const approverNote = z.string().trim().max(4_000).optional();

export const planCreate = defineOperation({
  name: "plan.create",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "Create a plan from a draft (goal and typed steps); refused with every problem when invalid",
  input: z.object({
    draft: z
      .looseObject({ goal: z.string(), steps: z.array(z.looseObject({})) })
      .describe("A plan draft: goal, steps [{id, tool, args, dependsOn, description, …}]"),
    workspaceId: z.uuid().optional().describe("A registered workspace (workspace.list); the default one otherwise"),
  }),
  output: planSchema,
  async run({ app, identity }, input) {
    if (input.workspaceId) await requireWorkspace(app.db.pool, input.workspaceId);
    try {
      return await createPlan(app.db.prisma, app.tools, {
        draft: input.draft,
        ...(input.workspaceId && { workspaceId: input.workspaceId }),
        source: identity.kind === "agent" ? "agent" : "manual",
        author: identity.name,
        ...(identity.kind === "agent" && { authorCredential: identity.tokenId ?? null }),
        workspaceRoot: app.workspaceRoot,
      });
    } catch (error) {
      // Seed 003's plan_validation_failed: one actionable sentence per problem, and the issues.
      if (error instanceof AppError && error.code === "invalid_plan" && Array.isArray(error.details)) {
        const issues = error.details as PlanIssue[];
        throw new AppError(
          "invalid_plan",
          "The submitted plan is invalid and was rejected. You must fix the plan and resubmit.",
          {
            error_type: "plan_validation_failed",
            details: issues.map((issue) => (issue.stepId ? `${issue.stepId}: ${issue.message}` : issue.message)),
            issues,
          },
        );
      }
      throw error;
    }
  },
});

/** The review page's import: a plan as JSON (exported, or any plan draft) becomes a new plan. */
export const planImport = defineOperation({
  name: "plan.import",
  summary: "Create a plan from plan JSON (as exported, or any plan draft); refused with every problem when invalid",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  input: z.object({
    goal: z.string().max(10_000).optional(),
    planJson: z.string().max(MAX_PLAN_JSON_BYTES * 2),
    source: z.enum(PLAN_SOURCES).default("manual"),
    workspaceId: z.uuid().optional(),
  }),
  output: planSchema,
  async run({ app, identity }, input) {
    if (input.workspaceId) await requireWorkspace(app.db.pool, input.workspaceId);
    return createPlan(app.db.prisma, app.tools, {
      draft: parsePlanJson(input.planJson, input.goal),
      // An agent's plan says so, whatever source it claims: its gates are raised to the defaults.
      source: identity.kind === "agent" ? "agent" : input.source,
      author: identity.name,
      ...(input.workspaceId && { workspaceId: input.workspaceId }),
      workspaceRoot: app.workspaceRoot,
    });
  },
});

export const planGet = defineOperation({
  name: "plan.get",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Read a plan (the current version, or the one given)",
  input: z.object({ planId, version: version.optional() }),
  output: planSchema,
  annotations: { readOnly: true },
  run: ({ app }, input) => getPlan(app.db.prisma, input.planId, input.version),
});

export const planMarkdown = defineOperation({
  name: "plan.markdown",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A plan as Markdown, for reading",
  input: z.object({ planId, version: version.optional() }),
  output: z.object({ markdown: z.string() }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    return { markdown: exportPlanMarkdown(await getPlan(app.db.prisma, input.planId, input.version)).content };
  },
});

export const planList = defineOperation({
  name: "plan.list",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Plans, most recently changed first",
  input: z.object({
    limit: z.number().int().min(1).max(200).optional().describe("At most this many (100 unless given)"),
    show: z.enum(["active", "archived"]).default("active").describe("archived: the archived and rejected plans"),
  }),
  output: z.object({ plans: z.array(planSummarySchema) }),
  annotations: { readOnly: true },
  run: async ({ app }, input) => ({ plans: await listPlans(app.db.prisma, { limit: input.limit, show: input.show }) }),
});

export const planEdit = defineOperation({
  name: "plan.edit",
  callers: PERSON_OR_AGENT,
  role: "reviewer",
  summary: "One edit of a plan, made on baseVersion; stores the next version (a stale base is a version_conflict)",
  input: z.object({ planId, baseVersion: version, edit: planEditSchema }),
  output: planSchema,
  async run({ app, identity }, input) {
    const editor = principalOf(identity);
    const { authority } = app.engine;
    // Writing a version of a plan at all (an agent, or a person reviewer and above).
    const mayEdit = authority.authorize(editor, "plan.edit");
    if (!mayEdit.allowed) throw new AppError("forbidden", `${identity.name} may not edit plans: ${mayEdit.reason}`);
    // An edit of a plan whose run is under way is adopted into that run. Unless the policy lets the
    // editor leave an effect ungated there (an approver or above), what the edit adds or changes
    // waits for an approver in the run — a reviewer's edit as an agent's — unless it is an agent's
    // own task or only reads.
    const underWay = await hasWorkUnderWay(app, input.planId);
    const plan = await editPlan(app.db.prisma, app.tools, {
      ...input,
      author: identity.name,
      editor,
      authority,
      gateChangedSteps: !authority.authorize(editor, "plan.write_ungated_effect", { underWay }).allowed,
      workspaceRoot: app.workspaceRoot,
    });
    await adoptIntoSessionRun(app, plan.id, plan.version, identity.name);
    return plan;
  },
});

/** Whether a plan has an open agent session or an unfinished run, either of which may adopt a new version. */
async function hasWorkUnderWay(app: OperationContext["app"], planId: string): Promise<boolean> {
  const found = await app.db.pool.query(
    `select 1 from agent_sessions where plan_id = $1 and closed_at is null
     union all
     select 1 from runs where plan_id = $1 and status = any($2)
     limit 1`,
    [planId, ACTIVE_RUN_STATUSES],
  );
  return (found.rowCount ?? 0) > 0;
}

export const planApprove = defineOperation({
  name: "plan.approve",
  callers: PERSON_ONLY,
  role: "approver",
  summary: "Approve exactly this version of a plan and start its run (a person only)",
  input: z.object({
    planId,
    version,
    maxParallel: z.number().int().min(1).max(256).optional(),
    /** How long each gated step may wait for a decision before it is skipped. */
    approvalTimeoutSeconds: z
      .number()
      .int()
      .min(1)
      .max(7 * 86_400)
      .optional(),
    approvalWarningSeconds: z.number().int().min(0).max(86_400).optional(),
    /**
     * Failed steps: `ask` (default) waits for a person to ask the planner and decide; `auto` asks
     * and applies the proposal by policy, at most twice per step, never an abort.
     */
    recovery: z.enum(["ask", "auto"]).optional(),
    note: approverNote.describe(
      "The approver's note: stored with the approval, audited, shown on the run page and given to the executing agent",
    ),
  }),
  output: z.object({ runId: z.string(), traceId: z.string() }),
  async run({ app, identity }, input) {
    // The run acts where the plan's task was made, not wherever the server happens to point.
    const workspace = await workspaceForPlan(app.db.pool, input.planId, app.workspaceRoot);
    const started = await startRun(app.engine, {
      planId: input.planId,
      version: input.version,
      actor: identity.name,
      ...(input.note && { note: input.note }),
      workspaceRoot: workspace.path,
      workspaceId: workspace.id,
      ...(input.maxParallel !== undefined && { maxParallel: input.maxParallel }),
      ...(input.approvalTimeoutSeconds !== undefined && { approvalTimeoutMs: input.approvalTimeoutSeconds * 1000 }),
      ...(input.approvalWarningSeconds !== undefined && { approvalWarningMs: input.approvalWarningSeconds * 1000 }),
      ...(input.recovery !== undefined && { recoveryPolicy: input.recovery }),
    });
    // An agent's plan (plan mode) goes back to the agent that made it, as its session's tasks.
    await attachApprovedPlan(app, {
      ...input,
      runId: started.runId,
      workspaceRoot: workspace.path,
      approvedBy: identity.name,
    });
    // An agent's `start` that waited for someone else's approval becomes its session now.
    const attachment = {
      planId: input.planId,
      version: input.version,
      runId: started.runId,
      workspaceRoot: workspace.path,
      approvedBy: identity.name,
    };
    await attachRequestedSession(app, attachment);
    // A plan of agent tasks an agent wrote itself (plan_create) goes to that agent, as its session.
    await attachAuthorsPlan(app, attachment);
    return started;
  },
});

/**
 * Whether a person approved a plan version (approving starts its run), optionally waiting for it.
 * An agent submits a plan with plan.create or plan.edit; only a person approves, in the browser.
 */
export const planReviewStatus = defineOperation({
  name: "plan.review_status",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Whether a person approved this plan version (and its run), waiting up to wait_seconds",
  input: z.object({
    planId,
    version: version.optional(),
    waitSeconds: z.number().int().min(0).max(600).default(0),
  }),
  output: z.object({
    planId: z.string(),
    version: z.number(),
    state: z.enum(["awaiting_review", "approved", "rejected", "changes_requested", "superseded"]),
    runId: z.string().optional(),
    approvedBy: z.string().optional(),
    /** For rejected and changes_requested: who decided, and their words (the instructions to revise by). */
    reviewedBy: z.string().optional(),
    comment: z.string().optional(),
    reviewUrl: z.string(),
  }),
  annotations: { readOnly: true, idempotent: true },
  async run({ app, signal }, input) {
    const deadline = Date.now() + input.waitSeconds * 1000;
    for (;;) {
      const facts = (await loadReviewFacts(app.db.pool, [{ planId: input.planId, version: input.version }])).get(
        input.planId,
      );
      if (!facts) throw new AppError("not_found", `No plan ${input.planId}`);
      const base = { planId: input.planId, version: facts.version, reviewUrl: `/plans/${input.planId}` };
      // The review state every reader shares (review-state.ts). Archived or still being revised
      // is no decision yet: the agent keeps waiting.
      const { state, ...review } = reviewStateOf(facts);
      if (state !== "awaiting_review" && state !== "archived" && state !== "revising") {
        return { ...base, state, ...review };
      }
      if (Date.now() >= deadline || signal?.aborted) return { ...base, state: "awaiting_review" as const };
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  },
});

/**
 * A person's review short of approval (seed 002): reject the plan (its planning session ends), or
 * send it back with instructions the agent revises by. Audited; the agent learns it through
 * plan.review_status.
 */
export const planReview = defineOperation({
  name: "plan.review",
  callers: PERSON_ONLY,
  role: "reviewer",
  summary: "Reject a plan version, or request changes with instructions (a person only)",
  input: z.object({
    planId,
    version,
    decision: z.enum(["reject", "request_changes"]),
    comment: z.string().trim().max(4_000).default(""),
  }),
  output: z.object({ ok: z.literal(true) }),
  async run({ app, identity }, input) {
    if (input.decision === "request_changes" && !input.comment) {
      throw new AppError("invalid_input", "Say what should change: the agent revises the plan by your instructions");
    }
    const facts = (await loadReviewFacts(app.db.pool, [{ planId: input.planId, version: input.version }])).get(
      input.planId,
    );
    if (!facts) throw new AppError("not_found", `No plan ${input.planId}`);
    if (input.version !== facts.currentVersion) {
      throw new AppError(
        "version_conflict",
        `Version ${input.version} is not the current version (${facts.currentVersion})`,
      );
    }
    if (reviewStateOf(facts).state === "approved") {
      throw new AppError("invalid_state", "This version was already approved and runs");
    }
    if (input.decision === "reject") {
      // The same rejection as the planning session page's (server/plans/lifecycle.ts).
      await rejectPlan(app.db.pool, {
        planId: input.planId,
        version: input.version,
        actor: identity.name,
        reason: input.comment,
      });
      return { ok: true as const };
    }
    await recordAudit(app.db.pool, {
      actor: identity.name,
      action: "plan.changes_requested",
      planId: input.planId,
      planVersion: input.version,
      detail: { comment: input.comment },
    });
    return { ok: true as const };
  },
});

export const planOperations = [
  planCreate,
  planImport,
  planGet,
  planMarkdown,
  planList,
  planEdit,
  planReviewStatus,
  planReview,
  planApprove,
] as AnyOperation[];
