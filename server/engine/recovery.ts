import { AppError } from "../errors";
import type { PrismaClient } from "../generated/prisma/client";
import type { Step } from "../plan-schema";
import { getPlan } from "../plans/service";
import { revisePlan } from "../plans/versions";
import { adoptPlanVersion, cancelRun, retryStep, skipStep, startRun, type EngineDeps } from "./engine";
import { buildRunGraph } from "./graph";
import type { RecoveryAction } from "./recovery-action";
import { FINISHED_RUN_STATUSES, isIn } from "../vocabulary";

/**
 * Interventions that change what a run executes. A change to a step's definition is always a new
 * plan version (visible in the plan's history and diff), never a silent per-run override.
 */

async function loadRun(prisma: PrismaClient, runId: string) {
  const run = await prisma.run.findUnique({ where: { id: runId } });
  if (!run) throw new AppError("not_found", `No run ${runId}`);
  return run;
}

/**
 * Stores `edit(steps)` as the plan's next version, made on the run's version; new steps get fresh
 * ids. If the plan was edited after the run started, the change is refused rather than undoing
 * those edits.
 */
function planVersionFromRun(
  prisma: PrismaClient,
  deps: EngineDeps,
  run: { planId: string; planVersion: number },
  actor: string,
  changeNote: string,
  edit: (steps: Step[]) => Step[],
) {
  return revisePlan(prisma, deps.tools, {
    planId: run.planId,
    baseVersion: run.planVersion,
    revise: (plan) => ({ ...plan, steps: edit(plan.steps) }),
    conflictMessage: (current) =>
      `The plan was edited after this run started (the run uses version ${run.planVersion}, the plan is at version ${current}); start a new run from the latest version instead`,
    source: "manual",
    author: actor,
    changeNote,
  });
}

/** Applies an accepted recovery proposal (or a person's own choice) to a failed step. */
export async function applyRecoveryAction(
  deps: EngineDeps,
  prisma: PrismaClient,
  input: { runId: string; stepId: string; action: RecoveryAction; actor: string },
): Promise<{ planVersion?: number }> {
  const { action, runId, stepId, actor } = input;
  if (action.kind === "skip") return skipStep(deps, { runId, stepId, actor }).then(() => ({}));
  if (action.kind === "abort") return cancelRun(deps, { runId, actor }).then(() => ({}));
  if (action.kind === "retry" && action.args === undefined) {
    return retryStep(deps, { runId, stepId, actor }).then(() => ({}));
  }
  const run = await loadRun(prisma, runId);
  const step = await prisma.runStep.findUnique({ where: { runId_stepId: { runId, stepId } } });
  if (!step) throw new AppError("not_found", `Run has no step ${stepId}`);
  // Checked again under the run lock when the new version is adopted; this early check keeps a
  // refused recovery from leaving an unused plan version behind in the common case.
  if (step.status !== "failed") {
    throw new AppError("invalid_state", `Only a failed step can be recovered; ${stepId} is ${step.status}`);
  }
  if (action.kind === "retry") {
    const { plan } = await planVersionFromRun(
      prisma,
      deps,
      run,
      actor,
      `Recovery: new arguments for ${stepId}`,
      (steps) => steps.map((s) => (s.id === stepId ? { ...s, args: action.args! } : s)),
    );
    await adoptPlanVersion(deps, {
      runId,
      stepId,
      newVersion: plan.version,
      insertedStepIds: [],
      actor,
      detail: { action: "retry", args: action.args },
    });
    return { planVersion: plan.version };
  }
  const { plan, newStepIds: insertedIds } = await planVersionFromRun(
    prisma,
    deps,
    run,
    actor,
    `Recovery: ${action.steps.length} step(s) inserted before ${stepId}`,
    (steps) => {
      const baseIds = new Set(steps.map((s) => s.id));
      const inserted = action.steps.map((s) => ({ ...s, dependsOn: s.dependsOn ?? [], args: s.args ?? {} }));
      const at = steps.findIndex((s) => s.id === stepId);
      const newIds = inserted.filter((s) => !baseIds.has(s.id)).map((s) => s.id);
      const failed = { ...steps[at]!, dependsOn: [...new Set([...steps[at]!.dependsOn, ...newIds])] };
      return [...steps.slice(0, at), ...(inserted as unknown as Step[]), failed, ...steps.slice(at + 1)];
    },
  );
  await adoptPlanVersion(deps, {
    runId,
    stepId,
    newVersion: plan.version,
    insertedStepIds: insertedIds,
    actor,
    detail: { action: "insert_steps", insertedStepIds: insertedIds },
  });
  return { planVersion: plan.version };
}

/**
 * Re-runs a finished run from `stepId` as a new run: that step and everything depending on it run
 * again (with edited arguments if given, stored as a new plan version); every other step that
 * completed keeps its recorded result, so no costly step is repeated.
 */
export async function rerunFrom(
  deps: EngineDeps,
  prisma: PrismaClient,
  input: { runId: string; stepId: string; args?: Record<string, unknown>; actor: string },
): Promise<{ runId: string; planVersion: number }> {
  const run = await loadRun(prisma, input.runId);
  if (!isIn(FINISHED_RUN_STATUSES, run.status)) {
    throw new AppError("invalid_state", `The run is still ${run.status}; cancel it or wait for it to finish first`);
  }
  const plan = await getPlan(prisma, run.planId, run.planVersion);
  const graph = buildRunGraph(plan.steps);
  if (!graph.steps.has(input.stepId)) throw new AppError("not_found", `Run has no step ${input.stepId}`);
  const rerun = new Set([input.stepId]);
  for (const id of rerun) for (const dependent of graph.dependents.get(id) ?? []) rerun.add(dependent);
  const completed = await prisma.runStep.findMany({
    where: { runId: input.runId, status: "completed" },
    select: { stepId: true, result: true },
  });
  const reuse = completed
    .filter((step) => !rerun.has(step.stepId) && (step.result as { ok?: boolean } | null)?.ok === true)
    .map((step) => step.stepId);
  let version = run.planVersion;
  if (input.args) {
    const args = input.args;
    const { plan: saved } = await planVersionFromRun(
      prisma,
      deps,
      run,
      input.actor,
      `Re-run from ${input.stepId} with new arguments`,
      (steps) => steps.map((s) => (s.id === input.stepId ? { ...s, args } : s)),
    );
    version = saved.version;
  }
  const started = await startRun(deps, {
    planId: run.planId,
    version,
    actor: input.actor,
    workspaceRoot: run.workspaceRoot,
    workspaceId: run.workspaceId,
    maxParallel: run.maxParallel,
    approvalTimeoutMs: run.approvalTimeoutMs,
    approvalWarningMs: run.approvalWarningMs,
    // The re-run keeps the person's choice about recovering failed steps.
    recoveryPolicy: run.recoveryPolicy === "auto" ? "auto" : "ask",
    reuse: { fromRunId: run.id, stepIds: reuse },
  });
  return { runId: started.runId, planVersion: version };
}
