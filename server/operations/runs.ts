import { z } from "zod";
import { answerQuestion, cancelRun, decideApproval, pauseRun, resumeRun, retryStep, skipStep } from "../engine/engine";
import {
  listRunDecisions,
  listRunSummaries,
  readRunEvents,
  runDecisionSchema,
  runEventsInputSchema,
  runEventsPageSchema,
  runListInputSchema,
  runListPageSchema,
} from "../engine/run-list";
import { approvalViewSchema, waitingApproval } from "../engine/approval-view";
import { getRun, listRuns, planRunSchema, runViewSchema } from "../engine/run-view";
import type { AppContext } from "../services";
import { reportedTasks } from "../agents/leases";
import { removeWorktreesOfRunIn } from "../agents/workspace-work";
import { AppError } from "../errors";
import {
  FINISHED_RUN_STATUSES,
  isIn,
  SETTLED_STEP_STATUSES,
  WAITING_FOR_PERSON_STEP_STATUSES,
  type CallerKind,
  type IdentityKind,
} from "../vocabulary";
import { PERSON_ONLY, PERSON_OR_AGENT } from "./policy";
import { approverNote } from "./plans";
import { defineOperation } from "./operation";
import type { AnyOperation } from "./operation";

/** Runs as operations: read, list, follow events, and steer. Decisions on gates are a person's. */
const runId = z.uuid();
const stepId = z.string().min(1).max(64);
const done = z.object({ ok: z.literal(true) });
export const runGet = defineOperation({
  name: "run.get",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A run's state: status, and each step's status, attempt, progress, result",
  input: z.object({ runId }),
  output: runViewSchema,
  annotations: { readOnly: true },
  run: ({ app }, input) => runView(app, input.runId),
});

/**
 * The run as the engine sees it, with the agent tasks reported DONE and being merged marked so
 * (the engine holds them running until the merge's outcome is recorded; task-reports.ts).
 */
async function runView(app: AppContext, id: string) {
  const run = await getRun(app.db.prisma, id, app.tools);
  if (!run.steps.some((step) => step.status === "running")) return run;
  const reported = await reportedTasks(app.db.pool, id);
  if (reported.size === 0) return run;
  return {
    ...run,
    steps: run.steps.map((step) => {
      const agent = reported.get(step.stepId);
      return agent === undefined || step.status !== "running"
        ? step
        : {
            ...step,
            waiting: {
              ...(step.waiting?.kind === "agent" && step.waiting),
              kind: "agent" as const,
              agent,
              merging: true,
            },
          };
    }),
  };
}

export const runList = defineOperation({
  name: "run.list",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "Runs, newest first, filtered by plan and state, paged by cursor",
  input: runListInputSchema,
  output: runListPageSchema,
  annotations: { readOnly: true },
  run: ({ app }, input) => listRunSummaries(app.db.pool, input),
});

export const runEvents = defineOperation({
  name: "run.events",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary: "A run's stored events after a sequence number, oldest first",
  input: runEventsInputSchema,
  output: runEventsPageSchema,
  annotations: { readOnly: true },
  run: ({ app }, input) => readRunEvents(app.db.pool, input),
});

/**
 * Waits until a run finishes, or needs a person (a gate, a question), or the time is up — and
 * reports progress meanwhile (MCP progress notifications) — so an agent can follow a run without
 * polling. Answers the run's state when it returns.
 */
export const runDecisions = defineOperation({
  name: "run.decisions",
  summary: "Who approved or denied which gated step of a run, and as what kind of identity, oldest first",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  input: z.object({ runId }),
  output: z.object({ decisions: z.array(runDecisionSchema) }),
  annotations: { readOnly: true },
  run: async ({ app }, input) => ({ decisions: await listRunDecisions(app.db.pool, input.runId) }),
});

export const runListForPlan = defineOperation({
  name: "run.list_for_plan",
  summary: "A plan's latest runs, newest first",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  input: z.object({ planId: z.string().min(1).max(100) }),
  output: z.object({ runs: z.array(planRunSchema) }),
  annotations: { readOnly: true },
  run: async ({ app }, input) => ({ runs: await listRuns(app.db.prisma, input.planId) }),
});

export const runWait = defineOperation({
  name: "run.wait",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary:
    "Wait (up to timeout_seconds) until a run finishes or waits for a person; progress is reported while waiting",
  input: z.object({
    runId,
    timeoutSeconds: z.number().int().min(1).max(600).default(60),
    /** Also return as soon as a step waits for a person's approval or answer. */
    untilWaiting: z.boolean().default(true),
  }),
  output: runViewSchema.extend({ waitedFor: z.enum(["finished", "waiting", "timeout"]) }),
  annotations: { readOnly: true, idempotent: true },
  async run({ app, progress, signal }, input) {
    const deadline = Date.now() + input.timeoutSeconds * 1000;
    let lastReported = -1;
    for (;;) {
      const run = await runView(app, input.runId);
      const settled = run.steps.filter((step) => isIn(SETTLED_STEP_STATUSES, step.status)).length;
      if (settled !== lastReported) {
        lastReported = settled;
        progress?.(
          settled,
          run.steps.length,
          `${settled} of ${run.steps.length} steps settled; the run is ${run.status}`,
        );
      }
      const waiting = run.steps.some((step) => isIn(WAITING_FOR_PERSON_STEP_STATUSES, step.status));
      if (isIn(FINISHED_RUN_STATUSES, run.status)) return { ...run, waitedFor: "finished" as const };
      if (input.untilWaiting && waiting) return { ...run, waitedFor: "waiting" as const };
      if (Date.now() >= deadline || signal?.aborted) return { ...run, waitedFor: "timeout" as const };
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  },
});

export const runDecide = defineOperation({
  name: "run.decide",
  callers: PERSON_ONLY,
  role: "approver",
  summary: "Approve or deny a gated step (a person only)",
  input: z.object({
    runId,
    stepId,
    approve: z.boolean(),
    comment: z.string().max(2000).optional().describe("Older name of note"),
    note: approverNote.describe("The decider's note: stored with the decision, audited, shown on the run page"),
    definitionHash: z
      .string()
      .regex(/^[0-9a-f]{64}$/)
      .optional()
      .describe("The step's definitionHash as shown with its pending approval; refused if the step changed since"),
  }),
  output: done,
  async run({ app, identity }, input) {
    const { note, comment, ...decision } = input;
    const words = note || comment?.trim() || undefined;
    await decideApproval(app.engine, { ...decision, ...(words && { comment: words }), actor: identity.name });
    return { ok: true as const };
  },
});

export const runAnswer = defineOperation({
  name: "run.answer",
  callers: PERSON_ONLY,
  role: "approver",
  summary: "Answer an ask_user step; the answer becomes its output (a person only)",
  input: z.object({ runId, stepId, answer: z.string().trim().min(1).max(10_000) }),
  output: done,
  async run({ app, identity }, input) {
    await answerQuestion(app.engine, { ...input, actor: identity.name });
    return { ok: true as const };
  },
});

function steer(
  name: string,
  summary: string,
  callers: readonly CallerKind[],
  action: (
    engine: AppContext["engine"],
    input: { runId: string; actor: string; actorKind: IdentityKind },
  ) => Promise<void>,
): ReturnType<typeof defineOperation<z.ZodObject<{ runId: typeof runId }>, typeof done>> {
  return defineOperation({
    name,
    summary,
    callers,
    // Steering a run is an approver's, as deciding its gates is.
    role: "approver",
    input: z.object({ runId }),
    output: done,
    annotations: { destructive: name === "run.cancel", idempotent: false },
    async run({ app, identity }, input) {
      await action(app.engine, { runId: input.runId, actor: identity.name, actorKind: identity.kind });
      return { ok: true as const };
    },
  });
}

function steerStep(name: string, summary: string, action: typeof retryStep) {
  return defineOperation({
    name,
    summary,
    // Trying a failed step again, or giving it up so its dependents run, steers the run past
    // what stopped it: a person's decision, never an agent's.
    callers: PERSON_ONLY,
    role: "approver",
    input: z.object({ runId, stepId }),
    output: done,
    async run({ app, identity }, input) {
      await action(app.engine, { ...input, actor: identity.name });
      return { ok: true as const };
    },
  });
}

/** Stopping work is anyone's to ask; starting it again is not (see `resumeRun`). */
export const runCancel = steer(
  "run.cancel",
  "Cancel a run: running steps are aborted, open steps cancelled, the run's task worktrees removed",
  PERSON_OR_AGENT,
  async (engine, input) => {
    await cancelRun(engine, input);
    // Worktrees (issue "Parallel agent work"): a cancelled run's task checkouts go; branches stay.
    await removeWorktreesOfRunIn(engine, input.runId);
  },
);
export const runPause = steer(
  "run.pause",
  "Pause a run: running steps finish, nothing new starts",
  PERSON_OR_AGENT,
  pauseRun,
);
export const runResume = steer(
  "run.resume",
  "Resume a paused run (an agent cannot resume a run a person paused)",
  PERSON_OR_AGENT,
  resumeRun,
);
export const runRetryStep = steerStep("run.retry_step", "Try a failed step again (a person only)", retryStep);
export const runSkipStep = steerStep(
  "run.skip_step",
  "Give a failed step, or an agent task its agent has not done, up; dependents that do not need its output run (a person only)",
  skipStep,
);

export const runApproval = defineOperation({
  name: "run.approval",
  callers: PERSON_OR_AGENT,
  role: "viewer",
  summary:
    "What approving a step waiting for approval would let run: tool, arguments resolved, workspace, computed risk",
  input: z.object({ runId, stepId }),
  output: z.object({ stepId: z.string(), status: z.string(), approval: approvalViewSchema.nullable() }),
  annotations: { readOnly: true },
  async run({ app }, input) {
    const found = await waitingApproval(app.db.pool, app.tools, input.runId, input.stepId);
    if (!found) throw new AppError("not_found", `No step ${input.stepId} in run ${input.runId}`);
    return { stepId: input.stepId, status: found.status, approval: found.view ?? null };
  },
});

export const runOperations = [
  runGet,
  runApproval,
  runWait,
  runList,
  runEvents,
  runDecisions,
  runListForPlan,
  runDecide,
  runAnswer,
  runCancel,
  runPause,
  runResume,
  runRetryStep,
  runSkipStep,
] as AnyOperation[];
