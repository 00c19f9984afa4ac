import { randomUUID } from "node:crypto";
import type pg from "pg";
import { planningDeadline } from "./plan-mode-timers";
import { listPlanningMessages, type PlanningMessage } from "./messages";
import {
  auditSession,
  MAX_FEEDBACK_CHARS,
  MAX_GOAL_CHARS,
  OPEN_STATUSES,
  type PlanningMode,
  type SessionStatus,
} from "./session-rules";
import { inTransaction } from "../db";
import { DONE_STEP_STATUSES } from "../vocabulary";
import * as store from "./session-store";
import { enqueuePlanningJob } from "../queue/jobs";
import { unservedWorkspace } from "../engine/unserved";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import type { NewEvent } from "../events/types";
import { getPlan } from "../plans/service";
import { requirePlanningModel } from "./config";
import type { PlannerDeps } from "./deps";
import type { PlanValidationFailed } from "./gates";
import { getUsage, type UsageTotals } from "./usage";

/**
 * Where a session's loop is (seed 002's phases): queued (not started yet), gathering (deep mode's
 * read-only exploration), drafting (quick mode and regenerate), submitted (a plan passed the
 * gates and is being saved), done. A worker that picks a session up again resumes from here.
 */
export type SessionPhase = "queued" | "gathering" | "drafting" | "submitted" | "done";

/** Why a session ended without a plan, as the UI shows it. */
export type SessionFailure =
  | PlanValidationFailed
  | { status: "error"; error_type: "provider_error"; message: string; kind: string; retryable: boolean }
  /** A wait that ran out: nobody answered, nobody reviewed, the agent went quiet (`kind` says which). */
  | { status: "error"; error_type: "timeout"; message: string; kind: string; retryable: boolean }
  | { status: "error"; error_type: "internal"; message: string; retryable: true };

export interface PlanningSessionView {
  id: string;
  /** external: an agent's own planning through MCP (seed 002 planning mode, server/planner/plan-mode.ts). */
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
  phase: SessionPhase;
  /**
   * The run of the plan this session made, once a person approved it: seed 002's planning mode
   * goes on "executing" until every step is settled, then it is done.
   */
  execution: { runId: string; status: string; settled: number; total: number } | null;
  /** When the current wait ends by itself (an unanswered question, an unreviewed agent plan, an idle agent). */
  deadline: { kind: "answer" | "review" | "idle"; at: string } | null;
  /** A person's messages while it planned, and whether the planner (or agent) has seen each. */
  messages: PlanningMessage[];
  /**
   * Why a session waiting for its loop to be taken does not start: no running worker serves its
   * workspace (its job waits in that workspace's queue). Null otherwise.
   */
  unserved: string | null;
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

/**
 * Creates a session and queues its loop in one transaction: any process with a worker runs it
 * (server/planner/session-jobs.ts), and it survives a restart of the process that started it.
 */
async function createQueued(deps: PlannerDeps, data: store.NewSession) {
  return inTransaction(deps.pool, async (client) => {
    const session = await store.createSession(client, data);
    await enqueuePlanningJob(client, session.id, data.workspaceRoot);
    return session;
  });
}

/** Starts planning a new task; the work continues in the background and streams its progress. */
export async function startPlanning(deps: PlannerDeps, input: StartPlanningInput): Promise<{ sessionId: string }> {
  const goal = checkText("The goal", input.goal, MAX_GOAL_CHARS);
  const model = requirePlanningModel(deps.config, input.model);
  const workspaceRoot = await workspaceRootFor(deps, input.workspaceId);
  const session = await createQueued(deps, {
    kind: "create",
    mode: input.mode,
    goal,
    model,
    workspaceId: input.workspaceId ?? null,
    workspaceRoot,
    useJudge: input.useJudge ?? deps.config.judgeByDefault,
    maxRefinements: input.maxRefinements ?? deps.config.maxRefinements,
    traceId: randomUUID(),
    actor: input.actor,
  });
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
  const session = await createQueued(deps, {
    kind: "regenerate",
    mode: input.mode ?? "quick",
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
  });
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

export async function emitTo(
  deps: PlannerDeps,
  session: { id: string; traceId: string },
  events: NewEvent[],
  client: Pick<pg.ClientBase, "query"> = deps.pool,
) {
  return appendEvents(
    client,
    { streamId: session.id, planId: session.id, runId: null, traceId: session.traceId },
    events,
  );
}

/**
 * Cancels a session at once, whether it is queued, running, or parked on a question: its status
 * changes here (so a session whose process died can be cancelled too), and the cancel event tells
 * the process running its loop, if any, to stop its calls.
 */
export async function cancelPlanning(deps: PlannerDeps, sessionId: string, actor: string): Promise<void> {
  const session = await deps.prisma.planningSession.findUnique({ where: { id: sessionId } });
  if (!session) throw new AppError("not_found", `No planning session ${sessionId}`);
  await inTransaction(deps.pool, async (client) => {
    const cancelled = await store.cancel(client, sessionId);
    await auditSession(client, cancelled, { actor, action: "planning.cancelled" });
    await emitTo(deps, cancelled, [{ type: "planning.cancelled", data: { by: actor } }], client);
  });
}

/**
 * The person's answer to a deep-mode question. The parked session goes back to running and its
 * loop is queued in the same transaction, so an answer given while no worker runs is used when
 * one starts. (An external agent's session is driven by the agent, which polls for the answer.)
 */
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
  const session = question.session;
  if (session.status !== "awaiting_answer") {
    throw new AppError("invalid_state", `The planner is not waiting for an answer (it is ${session.status})`);
  }
  const outcome = await inTransaction(deps.pool, async (client) => {
    const updated = await client.query(
      `update planning_questions set answer = $2, answered_by = $3, answered_at = now()
       where id = $1 and answer is null`,
      [input.questionId, answer, input.actor],
    );
    if (updated.rowCount === 0) return "answered" as const;
    if (session.kind !== "external") {
      // Refused (and the answer with it) when the session ended meanwhile: a timeout, a cancel.
      if ((await store.recordAnswer(client, session.id)) === "resumed") {
        await enqueuePlanningJob(client, session.id, session.workspaceRoot);
      }
    }
    await auditSession(client, session, {
      actor: input.actor,
      action: "planning.answered",
      detail: { questionId: input.questionId, question: question.question, answer },
    });
    await emitTo(
      deps,
      session,
      [{ type: "planning.answered", data: { questionId: input.questionId, answer, by: input.actor } }],
      client,
    );
    return "ok" as const;
  });
  if (outcome === "answered") throw new AppError("invalid_state", "This question has already been answered");
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
  const execution = session.planId ? await executionOf(deps, session.planId, session.resultVersion) : null;
  return {
    execution,
    unserved: await unservedText(deps, session),
    deadline: await planningDeadline(deps.pool, session.id),
    messages: await listPlanningMessages(deps.pool, session.id),
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
    phase: session.phase as SessionPhase,
  };
}

/**
 * A session whose loop is queued (nobody holds it) in a workspace no live worker serves says so:
 * its job waits in that workspace's queue until a worker serving it starts.
 */
async function unservedText(
  deps: PlannerDeps,
  session: { status: string; kind: string; workerId: string | null; workspaceRoot: string },
): Promise<string | null> {
  if (session.status !== "running" || session.kind === "external" || session.workerId !== null) return null;
  const workspace = await unservedWorkspace(deps.pool, session.workspaceRoot);
  if (!workspace) return null;
  return `No worker serves workspace ${workspace.name ?? workspace.path}: planning waits until a worker serving it starts`;
}

/** The newest run of the session's plan (at the version it made), with how many steps are settled. */
async function executionOf(
  deps: PlannerDeps,
  planId: string,
  version: number | null,
): Promise<PlanningSessionView["execution"]> {
  const rows = await deps.pool.query<{ id: string; status: string; settled: number; total: number }>(
    `select r.id, r.status,
       (select count(*)::int from run_steps s where s.run_id = r.id
          and s.status = any($3)) as settled,
       (select count(*)::int from run_steps s where s.run_id = r.id) as total
     from runs r where r.plan_id = $1 and ($2::int is null or r.plan_version >= $2)
     order by r.created_at desc limit 1`,
    [planId, version, DONE_STEP_STATUSES],
  );
  const row = rows.rows[0];
  return row ? { runId: row.id, status: row.status, settled: row.settled, total: row.total } : null;
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
    phase: row.phase as SessionPhase,
  }));
}

/**
 * Waits until no session of this database has work pending (tests): none is queued or running,
 * and no loop of this process is still finishing. Parked sessions wait for a person, not for us.
 */
export async function settlePlanning(deps: PlannerDeps, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const open = await deps.prisma.planningSession.count({ where: { status: "running", kind: { not: "external" } } });
    if (open === 0 && deps.background.size === 0) return;
    if (Date.now() > deadline) throw new Error(`${open} planning session(s) still running after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}
