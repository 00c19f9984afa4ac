import { redactSecrets } from "../redact";
import { randomUUID } from "node:crypto";
import { AppError, isAppError } from "../errors";
import { appendEvents } from "../events/store";
import { logger } from "../logger";
import type { NewEvent, StoredEvent } from "../events/types";
import { getPlan } from "../plans/service";
import { revisePlan } from "../plans/versions";
import { createPlan } from "../plans/service";
import { requirePlanningModel } from "./config";
import type { PlannerDeps } from "./deps";
import type { PlanValidationFailed } from "./gates";
import { PlanningCancelled } from "./model-call";
import { planDeep, planWithRefinement, type PlanningContext, type PlanningOutcome } from "./planning";
import { deepTaskPrompt, quickPlanPrompt, regeneratePrompt } from "./prompts";
import { snapshotWorkspace } from "./snapshot";
import { getUsage, type UsageTotals } from "./usage";

export const MAX_GOAL_CHARS = 4_000;
export const MAX_FEEDBACK_CHARS = 4_000;

export type PlanningMode = "quick" | "deep";
export type SessionStatus = "running" | "awaiting_answer" | "completed" | "invalid" | "failed" | "cancelled";
const OPEN_STATUSES: SessionStatus[] = ["running", "awaiting_answer"];

/** Why a session ended without a plan, as the UI shows it. */
export type SessionFailure =
  | PlanValidationFailed
  | { status: "error"; error_type: "provider_error"; message: string; kind: string; retryable: boolean }
  | { status: "error"; error_type: "internal"; message: string; retryable: true };

export interface PlanningSessionView {
  id: string;
  /** external: an agent's own planning through MCP (seed 002 planning mode, server/agents/plan-mode.ts). */
  kind: "create" | "regenerate" | "external";
  mode: PlanningMode;
  status: SessionStatus;
  goal: string;
  model: string;
  useJudge: boolean;
  maxRefinements: number;
  workspaceRoot: string;
  planId: string | null;
  baseVersion: number | null;
  resultVersion: number | null;
  feedback: string | null;
  draft: Record<string, unknown> | null;
  failure: SessionFailure | null;
  traceId: string;
  createdAt: string;
  finishedAt: string | null;
  questions: { id: string; question: string; answer: string | null; askedAt: string; answeredAt: string | null }[];
  usage: UsageTotals;
  /** Last event of the session's stream in this snapshot; the live stream continues after it. */
  lastSeq: number;
}

export interface StartPlanningInput {
  goal: string;
  mode: PlanningMode;
  model?: string;
  workspaceId?: string | null;
  useJudge?: boolean;
  maxRefinements?: number;
  actor: string;
}

function checkText(label: string, value: string, max: number): string {
  const trimmed = value.trim();
  if (!trimmed) throw new AppError("invalid_input", `${label} is empty`);
  if (trimmed.length > max) {
    throw new AppError("payload_too_large", `${label} is ${trimmed.length} characters; the limit is ${max}`);
  }
  return trimmed;
}

async function workspaceRootFor(deps: PlannerDeps, workspaceId: string | null | undefined): Promise<string> {
  if (!workspaceId) return deps.workspaceRoot;
  const workspace = await deps.prisma.workspace.findUnique({ where: { id: workspaceId } });
  if (!workspace) throw new AppError("not_found", `No workspace ${workspaceId}`);
  return workspace.path;
}

/** Starts planning a new task; the work continues in the background and streams its progress. */
export async function startPlanning(deps: PlannerDeps, input: StartPlanningInput): Promise<{ sessionId: string }> {
  const goal = checkText("The goal", input.goal, MAX_GOAL_CHARS);
  const model = requirePlanningModel(deps.config, input.model);
  const workspaceRoot = await workspaceRootFor(deps, input.workspaceId);
  const session = await deps.prisma.planningSession.create({
    data: {
      kind: "create",
      mode: input.mode,
      status: "running",
      goal,
      model,
      workspaceId: input.workspaceId ?? null,
      workspaceRoot,
      useJudge: input.useJudge ?? deps.config.judgeByDefault,
      maxRefinements: input.maxRefinements ?? deps.config.maxRefinements,
      traceId: randomUUID(),
      actor: input.actor,
    },
  });
  launch(deps, session.id);
  return { sessionId: session.id };
}

/** Regenerate with feedback: the current version plus the person's feedback make a new version. */
export async function startRegeneration(
  deps: PlannerDeps,
  input: {
    planId: string;
    baseVersion: number;
    feedback: string;
    mode?: PlanningMode;
    model?: string;
    useJudge?: boolean;
    actor: string;
  },
): Promise<{ sessionId: string }> {
  const feedback = checkText("The feedback", input.feedback, MAX_FEEDBACK_CHARS);
  const model = requirePlanningModel(deps.config, input.model);
  const plan = await getPlan(deps.prisma, input.planId, input.baseVersion);
  const planRow = await deps.prisma.plan.findUniqueOrThrow({ where: { id: input.planId }, include: { task: true } });
  if (planRow.currentVersion !== input.baseVersion) {
    throw new AppError(
      "version_conflict",
      `This plan changed meanwhile: you are looking at version ${input.baseVersion}, the current version is ${planRow.currentVersion}.`,
      { currentVersion: planRow.currentVersion },
    );
  }
  const workspaceRoot = await workspaceRootFor(deps, planRow.task.workspaceId);
  const session = await deps.prisma.planningSession.create({
    data: {
      kind: "regenerate",
      mode: input.mode ?? "quick",
      status: "running",
      goal: plan.goal,
      model,
      workspaceId: planRow.task.workspaceId,
      workspaceRoot,
      useJudge: input.useJudge ?? deps.config.judgeByDefault,
      maxRefinements: deps.config.maxRefinements,
      planId: input.planId,
      baseVersion: input.baseVersion,
      feedback,
      traceId: plan.traceId,
      actor: input.actor,
    },
  });
  launch(deps, session.id);
  return { sessionId: session.id };
}

/** Starts a new session with the same request as a finished one (after a provider error, say). */
export async function retryPlanning(
  deps: PlannerDeps,
  sessionId: string,
  actor: string,
): Promise<{ sessionId: string }> {
  const old = await deps.prisma.planningSession.findUnique({ where: { id: sessionId } });
  if (!old) throw new AppError("not_found", `No planning session ${sessionId}`);
  if (OPEN_STATUSES.includes(old.status as SessionStatus)) {
    throw new AppError("invalid_state", "This planning session is still running");
  }
  if (old.kind === "regenerate") {
    const current = await deps.prisma.plan.findUnique({ where: { id: old.planId! } });
    return startRegeneration(deps, {
      planId: old.planId!,
      baseVersion: current?.currentVersion ?? old.baseVersion!,
      feedback: old.feedback ?? "",
      mode: old.mode as PlanningMode,
      model: old.model,
      useJudge: old.useJudge,
      actor,
    });
  }
  return startPlanning(deps, {
    goal: old.goal,
    mode: old.mode as PlanningMode,
    model: old.model,
    workspaceId: old.workspaceId,
    useJudge: old.useJudge,
    maxRefinements: old.maxRefinements,
    actor,
  });
}

async function emitTo(deps: PlannerDeps, session: { id: string; traceId: string }, events: NewEvent[]) {
  return appendEvents(
    deps.pool,
    { streamId: session.id, planId: session.id, runId: null, traceId: session.traceId },
    events,
  );
}

/**
 * Cancels a running session at once: its status changes here (so a session whose process died
 * can be cancelled too) and the cancel event tells the process running it to stop its calls.
 */
export async function cancelPlanning(deps: PlannerDeps, sessionId: string, actor: string): Promise<void> {
  const session = await deps.prisma.planningSession.findUnique({ where: { id: sessionId } });
  if (!session) throw new AppError("not_found", `No planning session ${sessionId}`);
  const changed = await deps.prisma.planningSession.updateMany({
    where: { id: sessionId, status: { in: OPEN_STATUSES } },
    data: { status: "cancelled", finishedAt: new Date() },
  });
  if (changed.count === 0) throw new AppError("invalid_state", `This planning session is already ${session.status}`);
  await emitTo(deps, session, [{ type: "planning.cancelled", data: { by: actor } }]);
}

/** The person's answer to a deep-mode question; the waiting loop picks it up from the stream. */
export async function answerQuestion(
  deps: PlannerDeps,
  input: { sessionId: string; questionId: string; answer: string; actor: string },
): Promise<void> {
  const answer = checkText("The answer", input.answer, MAX_FEEDBACK_CHARS);
  const question = await deps.prisma.planningQuestion.findUnique({
    where: { id: input.questionId },
    include: { session: true },
  });
  if (!question || question.sessionId !== input.sessionId)
    throw new AppError("not_found", `No question ${input.questionId}`);
  if (question.session.status !== "awaiting_answer") {
    throw new AppError("invalid_state", `The planner is not waiting for an answer (it is ${question.session.status})`);
  }
  const updated = await deps.prisma.planningQuestion.updateMany({
    where: { id: input.questionId, answer: null },
    data: { answer, answeredBy: input.actor, answeredAt: new Date() },
  });
  if (updated.count === 0) throw new AppError("invalid_state", "This question has already been answered");
  await emitTo(deps, question.session, [
    { type: "planning.answered", data: { questionId: input.questionId, answer, by: input.actor } },
  ]);
}

export async function getPlanningSession(deps: PlannerDeps, sessionId: string): Promise<PlanningSessionView> {
  const [session, stream] = await Promise.all([
    deps.prisma.planningSession.findUnique({
      where: { id: sessionId },
      include: { questions: { orderBy: { askedAt: "asc" } } },
    }),
    deps.prisma.eventStream.findUnique({ where: { id: sessionId } }),
  ]);
  if (!session) throw new AppError("not_found", `No planning session ${sessionId}`);
  const { totals } = await getUsage(deps.prisma, { sessionId });
  return {
    id: session.id,
    kind: session.kind as PlanningSessionView["kind"],
    mode: session.mode as PlanningMode,
    status: session.status as SessionStatus,
    goal: session.goal,
    model: session.model,
    useJudge: session.useJudge,
    maxRefinements: session.maxRefinements,
    workspaceRoot: session.workspaceRoot,
    planId: session.planId,
    baseVersion: session.baseVersion,
    resultVersion: session.resultVersion,
    feedback: session.feedback,
    draft: session.draft as Record<string, unknown> | null,
    failure: session.failure as SessionFailure | null,
    traceId: session.traceId,
    createdAt: session.createdAt.toISOString(),
    finishedAt: session.finishedAt?.toISOString() ?? null,
    questions: session.questions.map((question) => ({
      id: question.id,
      question: question.question,
      answer: question.answer,
      askedAt: question.askedAt.toISOString(),
      answeredAt: question.answeredAt?.toISOString() ?? null,
    })),
    usage: totals,
    lastSeq: stream?.lastSeq ?? 0,
  };
}

export async function listPlanningSessions(deps: PlannerDeps, options: { planId?: string; limit?: number } = {}) {
  const rows = await deps.prisma.planningSession.findMany({
    where: options.planId ? { planId: options.planId } : {},
    orderBy: { createdAt: "desc" },
    take: options.limit ?? 20,
  });
  return rows.map((row) => ({
    id: row.id,
    kind: row.kind,
    mode: row.mode,
    status: row.status as SessionStatus,
    goal: row.goal,
    model: row.model,
    planId: row.planId,
    resultVersion: row.resultVersion,
    createdAt: row.createdAt.toISOString(),
  }));
}

function launch(deps: PlannerDeps, sessionId: string): void {
  const work = runSession(deps, sessionId).catch((error: unknown) => {
    logger.error({ sessionId, err: error }, "planning session crashed");
  });
  deps.background.add(work);
  void work.finally(() => deps.background.delete(work));
}

/** Waits for every background session of this planner (tests, shutdown). */
export async function settlePlanning(deps: PlannerDeps): Promise<void> {
  while (deps.background.size > 0) await Promise.all([...deps.background]);
}

/** Writes a final state only if nobody (a cancel) finished the session first. */
async function finish(
  deps: PlannerDeps,
  session: { id: string; traceId: string },
  status: SessionStatus,
  data: { failure?: SessionFailure; planId?: string; resultVersion?: number },
  event: NewEvent,
): Promise<boolean> {
  const changed = await deps.prisma.planningSession.updateMany({
    where: { id: session.id, status: { in: OPEN_STATUSES } },
    data: {
      status,
      finishedAt: new Date(),
      ...(data.failure && { failure: data.failure as object }),
      ...(data.planId && { planId: data.planId }),
      ...(data.resultVersion && { resultVersion: data.resultVersion }),
    },
  });
  if (changed.count > 0) await emitTo(deps, session, [event]);
  return changed.count > 0;
}

async function runSession(deps: PlannerDeps, sessionId: string): Promise<void> {
  const session = await deps.prisma.planningSession.findUniqueOrThrow({ where: { id: sessionId } });
  const controller = new AbortController();
  const waiters = new Map<string, (answer: string) => void>();
  const unsubscribe = deps.bus.subscribe(sessionId, (events: StoredEvent[]) => {
    for (const event of events) {
      if (event.type === "planning.cancelled") controller.abort();
      if (event.type === "planning.answered") {
        const { questionId, answer } = event.data as { questionId: string; answer: string };
        waiters.get(questionId)?.(answer);
      }
    }
  });
  const emit: PlanningContext["emit"] = async (type, data) => {
    await emitTo(deps, session, [{ type, data } as NewEvent]);
  };
  const context: PlanningContext = {
    deps,
    scope: { traceId: session.traceId, sessionId, ...(session.planId && { planId: session.planId }) },
    goal: session.goal,
    model: session.model,
    workspaceRoot: session.workspaceRoot,
    useJudge: session.useJudge,
    maxRefinements: session.maxRefinements,
    signal: controller.signal,
    emit,
    saveDraft: async (draft) => {
      await deps.prisma.planningSession.update({ where: { id: sessionId }, data: { draft: draft as object } });
    },
    ask: (question) => askPerson(deps, session, question, controller.signal, waiters),
  };
  try {
    // The session may have been cancelled before this process picked it up.
    const fresh = await deps.prisma.planningSession.findUniqueOrThrow({ where: { id: sessionId } });
    if (!OPEN_STATUSES.includes(fresh.status as SessionStatus)) return;
    await emit("planning.started", {
      kind: session.kind,
      mode: session.mode,
      model: session.model,
      goal: session.goal,
      judge: session.useJudge,
    });
    const snapshot = await snapshotWorkspace(session.workspaceRoot);
    await emit("planning.context", {
      message: `Workspace snapshot: ${snapshot.entries.length}${snapshot.truncated ? "+" : ""} entries, ${snapshot.keyFiles.length} key file${snapshot.keyFiles.length === 1 ? "" : "s"} (${snapshot.keyFiles.map((file) => file.path).join(", ") || "none"})`,
      entries: snapshot.entries.length,
      keyFiles: snapshot.keyFiles.map((file) => file.path),
    });
    const tools = deps.tools.list();
    let outcome: PlanningOutcome;
    if (session.kind === "regenerate") {
      const current = await getPlan(deps.prisma, session.planId!, session.baseVersion!);
      const prompt =
        session.mode === "deep"
          ? deepTaskPrompt({ goal: session.goal, snapshot: snapshot.text, tools, feedback: session.feedback ?? "" }) +
            `\n\nThe current plan:\n${JSON.stringify({ summary: current.summary, steps: current.steps })}`
          : regeneratePrompt({
              goal: session.goal,
              snapshot: snapshot.text,
              tools,
              currentPlan: current,
              feedback: session.feedback ?? "",
            });
      outcome = session.mode === "deep" ? await planDeep(context, prompt) : await planWithRefinement(context, prompt);
    } else if (session.mode === "deep") {
      outcome = await planDeep(context, deepTaskPrompt({ goal: session.goal, snapshot: snapshot.text, tools }));
    } else {
      outcome = await planWithRefinement(
        context,
        quickPlanPrompt({ goal: session.goal, snapshot: snapshot.text, tools }),
      );
    }
    if (controller.signal.aborted) throw new PlanningCancelled();
    if (outcome.kind === "invalid") {
      await finish(
        deps,
        session,
        "invalid",
        { failure: outcome.failure },
        {
          type: "planning.invalid",
          data: { details: outcome.failure.details },
        },
      );
      return;
    }
    const { totals } = await getUsage(deps.prisma, { sessionId });
    const usage = { inputTokens: totals.inputTokens, outputTokens: totals.outputTokens };
    if (session.kind === "regenerate") {
      const { plan: saved } = await revisePlan(deps.prisma, deps.tools, {
        planId: session.planId!,
        baseVersion: session.baseVersion!,
        revise: () => outcome.draft as { steps: { id: string }[] },
        source: "llm",
        author: session.actor,
        changeNote: `Regenerated with feedback: ${(session.feedback ?? "").slice(0, 200)}`,
        model: session.model,
        usage,
      });
      await finish(
        deps,
        session,
        "completed",
        { planId: saved.id, resultVersion: saved.version },
        {
          type: "planning.completed",
          data: { planId: saved.id, version: saved.version },
        },
      );
      return;
    }
    const plan = await createPlan(deps.prisma, deps.tools, {
      draft: outcome.draft,
      source: "llm",
      author: session.actor,
      ...(session.workspaceId && { workspaceId: session.workspaceId }),
      model: session.model,
      usage,
      traceId: session.traceId,
    });
    await deps.prisma.llmCall.updateMany({ where: { sessionId }, data: { planId: plan.id } });
    const finished = await finish(
      deps,
      session,
      "completed",
      { planId: plan.id, resultVersion: plan.version },
      {
        type: "planning.completed",
        data: { planId: plan.id, version: plan.version },
      },
    );
    if (!finished) await deps.prisma.planningSession.update({ where: { id: sessionId }, data: { planId: plan.id } });
  } catch (error) {
    if (error instanceof PlanningCancelled || controller.signal.aborted) {
      // cancelPlanning already recorded the cancellation.
      await finish(deps, session, "cancelled", {}, { type: "planning.cancelled", data: {} });
      return;
    }
    const failure: SessionFailure = isAppError(error)
      ? {
          status: "error",
          error_type: "provider_error",
          message: redactSecrets(error.message),
          kind: ((error.details as { kind?: string } | undefined)?.kind ?? error.code) as string,
          retryable: (error.details as { retryable?: boolean } | undefined)?.retryable ?? true,
        }
      : {
          status: "error",
          error_type: "internal",
          message: redactSecrets(
            `Planning stopped on an internal error: ${error instanceof Error ? error.message : String(error)}`,
          ),
          retryable: true,
        };
    await finish(deps, session, "failed", { failure }, { type: "planning.failed", data: { ...failure } });
  } finally {
    unsubscribe();
  }
}

/** Deep mode's ask_user: stores the question, waits for the answer on the session's stream. */
async function askPerson(
  deps: PlannerDeps,
  session: { id: string; traceId: string },
  question: string,
  signal: AbortSignal,
  waiters: Map<string, (answer: string) => void>,
): Promise<string> {
  const row = await deps.prisma.planningQuestion.create({
    data: { sessionId: session.id, question: question.slice(0, 4_000) },
  });
  const answered = new Promise<string>((resolve) => waiters.set(row.id, resolve));
  const moved = await deps.prisma.planningSession.updateMany({
    where: { id: session.id, status: "running" },
    data: { status: "awaiting_answer" },
  });
  if (moved.count === 0) throw new PlanningCancelled();
  await emitTo(deps, session, [{ type: "planning.question", data: { questionId: row.id, question } }]);
  let timer: NodeJS.Timeout | undefined;
  try {
    const answer = await Promise.race([
      answered,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () =>
            reject(
              new AppError(
                "provider_error",
                `Nobody answered the planner's question within ${Math.round(deps.answerTimeoutMs / 60_000)} minutes.`,
                { kind: "answer_timeout", retryable: true },
              ),
            ),
          deps.answerTimeoutMs,
        );
        signal.addEventListener("abort", () => reject(new PlanningCancelled()), { once: true });
      }),
      // An answer given before the waiter existed (another process) is already in the row.
      (async () => {
        const stored = await deps.prisma.planningQuestion.findUnique({ where: { id: row.id } });
        if (stored?.answer) return stored.answer;
        return answered;
      })(),
    ]);
    await deps.prisma.planningSession.updateMany({
      where: { id: session.id, status: "awaiting_answer" },
      data: { status: "running" },
    });
    return answer;
  } finally {
    clearTimeout(timer);
    waiters.delete(row.id);
  }
}
