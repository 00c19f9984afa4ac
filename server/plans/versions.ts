import { z } from "zod";
import { recordAudit } from "../audit/audit-log";
import { DEFAULT_APPROVER_POLICY, workspacePolicy } from "../people/approver-policy";
import { authority as productionAuthority, type Authority, type Principal } from "../policy/authority";
import { planAuthors } from "../policy/facts";
import { PRISMA_TRANSACTION_OPTIONS, prismaQueryable, type PrismaTransaction } from "../db";
import { AppError, isAppError } from "../errors";
import { appendEvents } from "../events/store";
import type { PrismaClient } from "../generated/prisma/client";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import type { ToolRegistry } from "../tools/registry";
import { refreshPlanArtifacts } from "./artifacts";
import { waiverDefinitionHash } from "../audit/definition-hash";
import { findReferences } from "./references";
import type { Plan, PlanSource, Step } from "../plan-schema";
import { matchStepIdentities, type IdentityStep } from "./step-identity";
import { checkPlanToStore, getPlan, highestStepNumber, planVersionRow } from "./service";
import { defaultWorkspace } from "./workspaces";

/**
 * Every change to a plan — an edit in the review page, a regenerated draft, an import, an agent's
 * update — is stored through `savePlanVersion` as a new immutable version. The version it was made
 * on travels with it, so two editors never silently overwrite each other.
 */
export interface SavePlanVersionInput {
  planId: string;
  /** The version the change was made on; a newer current version refuses the change. */
  baseVersion: number;
  /** The complete new content (a plan draft: goal, steps, …), validated like a new plan. */
  draft: unknown;
  source: PlanSource;
  author: string;
  /** One line for the history list: what changed and why. */
  changeNote: string;
  /** Set by undo: the version whose content this restores, so its step ids may come back. */
  restoresVersion?: number;
  /**
   * Steps whose default gate a person turns off in this change. Only a person in the review page
   * may waive a gate; every other source's `approvalRequired: false` is raised to the default.
   */
  waivedGates?: string[];
  /**
   * Who makes the change, as the authority policy sees them. A new waiver is an approval decision
   * (`gate.lower`): refused unless this principal may approve the plan's steps — an approver or
   * above, not an author under a policy that excludes authors.
   */
  editor?: Principal;
  /** The policy that judges `editor` (the app context's `engine.authority`; default: production). */
  authority?: Authority;
  /**
   * An agent's change to a plan whose run is under way: every step it adds or whose tool or
   * arguments it changes waits for a person's approval in the run (its gate is raised), unless it
   * is one of the agent's own tasks or its tool only reads. An agent proposes; a person disposes.
   */
  gateChangedSteps?: boolean;
  model?: string;
  usage?: { inputTokens: number; outputTokens: number };
  /** A seed 000 checklist: titles only (see `checkPlanQuality`). */
  checklist?: boolean;
  /** What the quality gates find is stored as advice for the reviewer instead of refusing (plan mode). */
  qualityAdvisory?: boolean;
  /** The default workspace: file names are checked there when the plan has none of its own. */
  workspaceRoot?: string;
}

export async function savePlanVersion(
  prisma: PrismaClient,
  tools: ToolRegistry,
  input: SavePlanVersionInput,
): Promise<Plan> {
  const owner = await prisma.plan.findUnique({
    where: { id: input.planId },
    select: { task: { select: { workspaceId: true } } },
  });
  if (!owner) throw new AppError("not_found", `No plan ${input.planId}`);
  // The same gates as a new plan, checked against the plan's own workspace.
  const { content, advice } = await checkPlanToStore(prisma, tools, input.draft, {
    workspaceId: owner.task.workspaceId,
    ...(input.workspaceRoot && { workspaceRoot: input.workspaceRoot }),
    ...(input.checklist && { checklist: true }),
    ...(input.qualityAdvisory && { qualityAdvisory: true }),
  });
  const version = input.baseVersion + 1;
  await prisma.$transaction(async (db) => {
    // The plan row lock serialises concurrent changes, so the loser sees the winner's version.
    const [current] = await db.$queryRaw<{ currentVersion: number; lastStepNumber: number }[]>`
      select current_version as "currentVersion", last_step_number as "lastStepNumber"
      from plans where id = ${input.planId} for update`;
    if (!current) throw new AppError("not_found", `No plan ${input.planId}`);
    if (current.currentVersion !== input.baseVersion) {
      throw new AppError(
        "version_conflict",
        `This plan changed meanwhile: you edited version ${input.baseVersion}, the current version is ${current.currentVersion}.`,
        { currentVersion: current.currentVersion },
      );
    }
    const base = await db.planVersion.findUnique({
      where: { planId_version: { planId: input.planId, version: input.baseVersion } },
      select: { steps: true, traceId: true },
    });
    if (!base) throw new AppError("not_found", `Plan ${input.planId} has no version ${input.baseVersion}`);
    const waived = keepWaivedGates(base.steps as unknown as Step[], content.steps, input);
    const lowered = waived.length > 0 ? await authorizeWaivers(db, input, owner.task.workspaceId, waived) : undefined;
    if (input.gateChangedSteps) gateChangedSteps(base.steps as unknown as Step[], content.steps, tools);
    const restored =
      input.restoresVersion === undefined
        ? null
        : await db.planVersion.findUnique({
            where: { planId_version: { planId: input.planId, version: input.restoresVersion } },
            select: { steps: true },
          });
    const reused = reusedStepIds(
      [...(base.steps as { id: string }[]), ...((restored?.steps ?? []) as { id: string }[])].map((step) => step.id),
      content.steps.map((step) => step.id),
      current.lastStepNumber,
    );
    if (reused.length > 0) {
      throw new AppError("invalid_plan", `Step ids are never reused: ${reused.join(", ")} belonged to removed steps`);
    }
    await db.plan.update({
      where: { id: input.planId },
      data: { currentVersion: version, lastStepNumber: Math.max(current.lastStepNumber, highestStepNumber(content)) },
    });
    await db.planVersion.create({
      data: planVersionRow(input.planId, version, content, { ...input, traceId: base.traceId, advice }),
    });
    for (const stepId of waived) {
      // The waiver covers this definition only: the engine gates the step again if it changes.
      const definitionHash = waiverDefinitionHash(content.steps.find((step) => step.id === stepId)!);
      await db.$executeRaw`
        insert into gate_waivers (plan_id, plan_version, step_id, definition_hash, actor)
        values (${input.planId}, ${version}, ${stepId}, ${definitionHash}, ${input.author})`;
      await recordAudit(prismaQueryable(db), {
        actor: input.author,
        action: "gate.waived",
        planId: input.planId,
        planVersion: version,
        stepId,
        // A waiver is one approver's decision, counted by the claim like an approval.
        detail: { definitionHash, decision: "gate.lower", rule: lowered?.rule },
      });
    }
    await recordAudit(prismaQueryable(db), {
      actor: input.author,
      action: "plan.version_created",
      planId: input.planId,
      planVersion: version,
      detail: { baseVersion: input.baseVersion, changeNote: input.changeNote, source: input.source },
    });
    await appendEvents(
      prismaQueryable(db),
      { streamId: input.planId, planId: input.planId, runId: null, traceId: base.traceId },
      [{ type: "plan.updated", data: { version, baseVersion: input.baseVersion, changeNote: input.changeNote } }],
    );
  }, PRISMA_TRANSACTION_OPTIONS);
  const saved = await getPlan(prisma, input.planId, version);
  const task = await prisma.task.findUnique({ where: { id: saved.taskId }, include: { workspace: true } });
  await refreshPlanArtifacts(task?.workspace?.path, saved);
  return saved;
}

/** A step of a draft as `revisePlan` renumbers it: only its id, dependencies and arguments matter. */
type DraftStep = { id: string; dependsOn?: string[]; args?: Record<string, unknown> };

export interface RevisePlanInput extends Omit<SavePlanVersionInput, "draft"> {
  /**
   * The new content, made from the base version. Steps whose id the base version does not have are
   * new: they get fresh `step_N` ids above every id ever handed out (dependencies and `$step`
   * references follow), so an author who cannot know the plan's history — an LLM, an import, a
   * recovery proposal — never reuses a removed step's id.
   */
  revise: (base: Plan) => { steps: DraftStep[] } & Record<string, unknown>;
  /** The refusal's message when the plan is no longer at `baseVersion` (default: savePlanVersion's). */
  conflictMessage?: (currentVersion: number) => string;
  /**
   * The author hands over a whole new list of steps without the plan's ids (an agent's
   * resubmission, a regenerated draft): steps that are, or are a changed form of, a base step
   * keep its id (`matchStepIdentities`), so diffs and comment answers stay true. Not for authors
   * whose new steps are new by intent (a recovery's replacement must not inherit a failed step).
   */
  matchIdentity?: boolean;
}

export interface PlanRevision {
  plan: Plan;
  /** The (fresh) ids of the steps the revision added, in plan order. */
  newStepIds: string[];
}

/**
 * The one way to store a revision of a plan written against a base version: checks the plan is
 * still at that version, builds the new content from it, renumbers the new steps and saves the
 * next version (`savePlanVersion`, which checks the version again under the plan's lock). Issues
 * in a refused revision name steps by the ids the author gave them, not fresh ids never stored.
 */
export async function revisePlan(
  prisma: PrismaClient,
  tools: ToolRegistry,
  input: RevisePlanInput,
): Promise<PlanRevision> {
  const { revise, conflictMessage, matchIdentity, ...save } = input;
  const row = await prisma.plan.findUnique({
    where: { id: input.planId },
    select: { currentVersion: true, lastStepNumber: true },
  });
  if (!row) throw new AppError("not_found", `No plan ${input.planId}`);
  if (row.currentVersion !== input.baseVersion) {
    throw new AppError(
      "version_conflict",
      conflictMessage?.(row.currentVersion) ??
        `This plan changed meanwhile: you edited version ${input.baseVersion}, the current version is ${row.currentVersion}.`,
      { currentVersion: row.currentVersion },
    );
  }
  const base = await getPlan(prisma, input.planId, input.baseVersion);
  const baseIds = new Set(base.steps.map((step) => step.id));
  const draft = revise(base);
  const identities = matchIdentity
    ? matchStepIdentities(base.steps, draft.steps as unknown as IdentityStep[])
    : new Map<string, string>();
  const steps = renumberNewSteps(draft.steps, baseIds, row.lastStepNumber, identities);
  try {
    const plan = await savePlanVersion(prisma, tools, { ...save, draft: { ...draft, steps } });
    return { plan, newStepIds: steps.filter((step) => !baseIds.has(step.id)).map((step) => step.id) };
  } catch (error) {
    throw withDraftIds(error, new Map(steps.map((step, index) => [step.id, draft.steps[index]!.id])));
  }
}

function withDraftIds(error: unknown, ids: ReadonlyMap<string, string>): unknown {
  if (!isAppError(error) || !Array.isArray(error.details)) return error;
  const issues = (error.details as { stepId?: string }[]).map((issue) =>
    issue.stepId && ids.has(issue.stepId) ? { ...issue, stepId: ids.get(issue.stepId) } : issue,
  );
  return new AppError(error.code, error.message, issues);
}

/**
 * Normalising raised every gate to its tool's default (gates only go up). A gate stays off only
 * where a person turns it off now (`waivedGates`, audited as `gate.waived` on this version) or
 * where it was already off for the same tool and arguments in the base version — forms send every
 * field back, so an unchanged "approval required: no" is not a new decision; but any change to
 * what runs (a read-only `ls` edited into `rm -rf build`, another timeout — the definition hash)
 * needs a new waiver. Returns the newly waived steps.
 */
function keepWaivedGates(baseSteps: Step[], steps: Step[], input: SavePlanVersionInput): string[] {
  const drafted = new Map(
    ((input.draft as { steps?: { id?: unknown; approvalRequired?: unknown }[] }).steps ?? []).map((step) => [
      step.id,
      step.approvalRequired,
    ]),
  );
  const before = new Map(baseSteps.map((step) => [step.id, step]));
  const waived: string[] = [];
  for (const step of steps) {
    if (!step.approvalRequired || drafted.get(step.id) !== false) continue;
    const old = before.get(step.id);
    const alreadyWaived =
      old !== undefined && !old.approvalRequired && waiverDefinitionHash(old) === waiverDefinitionHash(step);
    if (input.waivedGates?.includes(step.id)) {
      step.approvalRequired = false;
      if (!alreadyWaived) waived.push(step.id);
    } else if (alreadyWaived) {
      step.approvalRequired = false;
    }
  }
  return waived;
}

/**
 * A new waiver is an approval decision: refused (with the rule that refused it, and nothing
 * saved) unless the editor may lower gates of this plan — `gate.lower` of the authority policy,
 * over every author of the plan including this change's and the workspace's approver policy.
 */
async function authorizeWaivers(
  db: PrismaTransaction,
  input: SavePlanVersionInput,
  workspaceId: string | null,
  waived: string[],
) {
  const queryable = prismaQueryable(db);
  // A plan made without a workspace runs in the default one (`workspaceForPlan`), under its policy:
  // the waiver is judged under the same policy as the run's approvals, not the built-in default.
  const workspace =
    workspaceId ?? (input.workspaceRoot ? (await defaultWorkspace(queryable, input.workspaceRoot)).id : null);
  const policy = workspace ? await workspacePolicy(queryable, workspace) : DEFAULT_APPROVER_POLICY;
  const authors = [...new Set([...(await planAuthors(queryable, input.planId, input.baseVersion)), input.author])];
  const editor = input.editor ?? { kind: "agent" as const, name: input.author };
  const decision = (input.authority ?? productionAuthority).authorize(editor, "gate.lower", { policy, authors });
  if (!decision.allowed) {
    throw new AppError(
      "forbidden",
      `Turning off the approval gate of ${waived.join(", ")} is an approval decision, and ${input.author} may not make it: ${decision.reason}`,
      { rule: decision.rule, steps: waived },
    );
  }
  return decision;
}

/**
 * Raises the gate of every step that is new or runs something new (another tool, other arguments)
 * compared with the base version — except the agent's own tasks (`agent_task`, which the agent
 * itself carries out and reports) and tools that by their own classification only read.
 */
function gateChangedSteps(baseSteps: Step[], steps: Step[], tools: ToolRegistry): void {
  const before = new Map(baseSteps.map((step) => [step.id, step]));
  for (const step of steps) {
    const old = before.get(step.id);
    // A gate the base version had stays up too: turning it off is an approver's decision.
    const unchanged =
      old !== undefined &&
      old.tool === step.tool &&
      JSON.stringify(old.args) === JSON.stringify(step.args) &&
      (!old.approvalRequired || step.approvalRequired);
    if (unchanged) continue;
    const tool = tools.get(step.tool);
    if (tool && (tool.name === AGENT_TASK_TOOL || tool.readOnly)) continue;
    step.approvalRequired = true;
  }
}

/** `step_N` ids in `next` that name no step of the base version yet were handed out before. */
function reusedStepIds(baseIds: string[], nextIds: string[], lastStepNumber: number): string[] {
  const base = new Set(baseIds);
  return nextIds.filter((id) => {
    const number = /^step_(\d+)$/.exec(id)?.[1];
    return number !== undefined && !base.has(id) && Number(number) <= lastStepNumber;
  });
}

/**
 * Gives every step of `steps` that is new relative to the base version a fresh `step_N` id
 * (N above `lastStepNumber`) — or the base id it was matched to (`identities`) — and rewrites
 * dependencies and `$step` references to match. Used for drafts written by someone who cannot
 * know which ids were handed out before (an LLM, an import, an agent).
 */
export function renumberNewSteps<
  S extends { id: string; dependsOn?: string[]; args?: Record<string, unknown>; when?: string; forEach?: string },
>(
  steps: S[],
  baseIds: ReadonlySet<string>,
  lastStepNumber: number,
  identities: ReadonlyMap<string, string> = new Map(),
): S[] {
  const renamed = new Map<string, string>();
  let next = lastStepNumber;
  for (const step of steps) {
    if (!baseIds.has(step.id)) renamed.set(step.id, identities.get(step.id) ?? `step_${++next}`);
  }
  if (renamed.size === 0) return steps;
  const rename = (id: string) => renamed.get(id) ?? id;
  return steps.map((step) => ({
    ...step,
    id: rename(step.id),
    ...(step.dependsOn && { dependsOn: step.dependsOn.map(rename) }),
    ...(step.args && { args: renameReferences(step.args, renamed) as Record<string, unknown> }),
    // A condition or a fan-out list reads earlier steps by id too: they follow the new ids.
    ...(step.when !== undefined && { when: renameInCondition(step.when, renamed) }),
    ...(step.forEach !== undefined && { forEach: renameReferences(step.forEach, renamed) as string }),
  }));
}

/** `$draft_2.code == 0 && $draft_1.status == "completed"` with each renamed step's new id. */
function renameInCondition(when: string, renamed: ReadonlyMap<string, string>): string {
  return when.replace(/\$([A-Za-z][\w-]*)/g, (whole, id: string) => {
    const next = renamed.get(id);
    return next === undefined ? whole : `$${next}`;
  });
}

function renameReferences(args: unknown, renamed: ReadonlyMap<string, string>): unknown {
  if (typeof args === "string") {
    const [reference] = findReferences(args, (id) => renamed.has(id));
    if (!reference) return args;
    return ["$" + renamed.get(reference.stepId)!, ...reference.fieldPath].join(".");
  }
  if (Array.isArray(args)) return args.map((item) => renameReferences(item, renamed));
  if (args !== null && typeof args === "object") {
    return Object.fromEntries(Object.entries(args).map(([key, value]) => [key, renameReferences(value, renamed)]));
  }
  return args;
}

/** Version history of a plan, newest first: who changed what, when. */
/** A plan's version as its history lists it: who made it, from where, and why. */
export const planVersionSummarySchema = z.object({
  version: z.number(),
  author: z.string(),
  source: z.string(),
  changeNote: z.string().nullable(),
  createdAt: z.string(),
  model: z.string().nullable(),
});

export async function listPlanVersions(
  prisma: PrismaClient,
  planId: string,
): Promise<z.output<typeof planVersionSummarySchema>[]> {
  const rows = await prisma.planVersion.findMany({
    where: { planId },
    orderBy: { version: "desc" },
    select: { version: true, author: true, source: true, changeNote: true, createdAt: true, model: true },
  });
  if (rows.length === 0) throw new AppError("not_found", `No plan ${planId}`);
  return rows.map((row) => ({ ...row, createdAt: row.createdAt.toISOString() }));
}
