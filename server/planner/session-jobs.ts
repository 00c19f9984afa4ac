/**
 * A planning session's loop as queued work (graphile-worker, like engine steps): a worker serving
 * the session's workspace runs it (the loop reads the workspace's files: its snapshot, deep mode's
 * read-only tools), and a session survives the process that ran it. What a resumed loop needs is
 * in the session row: its phase, deep mode's transcript (loop_state, saved after each model turn
 * and each tool result) and the questions with their answers. Waiting for a person holds no job:
 * the session parks as `awaiting_answer`, and answering it queues the loop again.
 */
import type pg from "pg";
import { agentWaitTasks } from "./plan-mode-timers";
import { inTransaction } from "../db";
import { enqueuePlanningJob, enqueuePlanningTimeout, PLANNING_TASK, PLANNING_TIMEOUT_TASK } from "../queue/jobs";
import type { ExtraWork } from "../engine/worker";
import type { NewEvent, StoredEvent } from "../events/types";
import { logger } from "../logger";
import { createPlan } from "../plans/service";
import { revisePlan } from "../plans/versions";
import type { PlannerDeps } from "./deps";
import { PlanningCancelled } from "./model-call";
import type { DeepState, PlanningContext, PlanningOutcome } from "./planning";
import { auditSession } from "./session-rules";
import { emitTo, type SessionFailure, type SessionPhase } from "./sessions";
import { planningInbox } from "./messages";
import * as store from "./session-store";
import { draftPlan, failureOf, type SessionRow } from "./session-drafting";
import { getUsage } from "./usage";

const log = logger.child({ component: "planner" });

/** The loop stopped because it waits for the person; not an error, and not the end. */
export class PlanningParked extends Error {
  constructor() {
    super("Waiting for the person's answer");
    this.name = "PlanningParked";
  }
}

/** The loop stopped because this worker is shutting down or lost the session to another. */
class PlanningReleased extends Error {
  constructor(reason: string) {
    super(reason);
    this.name = "PlanningReleased";
  }
}

const { OWNER_ALIVE } = store;

/** The worker's planning work: the two task handlers, recovery on each tick, abort on shutdown. */
export function planningWork(planner: () => PlannerDeps, worker: { workerId: string }): ExtraWork {
  const running = new Map<string, AbortController>();
  return {
    // Listed once per workspace the worker serves (`planning_session@<key>`, worker.ts).
    workspaceTasks: {
      [PLANNING_TASK]: async (payload) => {
        const deps = planner();
        const work = runSessionJob(deps, (payload as { sessionId: string }).sessionId, worker.workerId, running);
        deps.background.add(work);
        try {
          await work;
        } finally {
          deps.background.delete(work);
        }
      },
    },
    tasks: {
      // A job queued before sessions were routed (the plain name): any worker takes it, and it
      // only queues the session again under its workspace's task.
      [PLANNING_TASK]: async (payload) => {
        await routeQueuedSession(planner().pool, (payload as { sessionId: string }).sessionId);
      },
      [PLANNING_TIMEOUT_TASK]: async (payload) => {
        await timeOutQuestion(planner(), payload as { sessionId: string; questionId: string; timeoutMs?: number });
      },
      // An agent's plan mode: its review and idle timers (server/planner/plan-mode-timers.ts).
      ...agentWaitTasks(() => planner().pool),
    },
    maintain: async () => {
      await recoverPlanningSessions(planner(), worker.workerId);
    },
    abortAll: () => {
      for (const controller of running.values()) controller.abort(new PlanningReleased("The worker is shutting down"));
    },
  };
}

/**
 * Queues an open session's loop again under its workspace's task. The job running this holds the
 * session's key, so graphile adds a fresh job (and lets this one go) rather than replacing it.
 */
async function routeQueuedSession(pool: pg.Pool, sessionId: string): Promise<void> {
  await inTransaction(pool, async (client) => {
    const session = await client.query<{ workspace_root: string }>(
      "select workspace_root from planning_sessions where id = $1 and status = 'running' and kind <> 'external'",
      [sessionId],
    );
    const row = session.rows[0];
    if (row) await enqueuePlanningJob(client, sessionId, row.workspace_root);
  });
}

/**
 * Sessions whose loop nobody is running although it should run: the worker that ran it stopped
 * beating (killed), or nobody holds it and no job of its is queued or running. Each is queued
 * again; its loop resumes from the saved state.
 *
 * A job locked by a dead worker is not this function's: `unlockJobsOfDeadWorkers` frees it by the
 * same liveness rule and it runs again. Judging a lock by its age here instead queued a second
 * job whenever a live worker took longer than five heartbeats between locking the job and
 * claiming the session (a busy machine), which moved the session's key off the job running it.
 */
export async function recoverPlanningSessions(deps: PlannerDeps, workerId: string): Promise<number> {
  const orphans = await deps.pool.query<{ id: string; workspace_root: string }>(
    `select s.id, s.workspace_root from planning_sessions s
     where s.status = 'running' and s.kind <> 'external'
       and s.worker_id is distinct from $1
       and (
         (s.worker_id is not null and not ${OWNER_ALIVE})
         or (s.worker_id is null and not exists (
           select 1 from graphile_worker.jobs j where j.key = 'planning:' || s.id))
       )`,
    [workerId],
  );
  for (const orphan of orphans.rows) {
    await inTransaction(deps.pool, async (client) => {
      if (await store.releaseOrphan(client, orphan.id)) {
        await enqueuePlanningJob(client, orphan.id, orphan.workspace_root);
      }
    });
    log.warn({ sessionId: orphan.id }, "planning session's worker is gone: queued it to resume");
  }
  return orphans.rowCount ?? 0;
}

/** Cancels a session whose question is still unanswered when its timer fires. */
async function timeOutQuestion(
  deps: PlannerDeps,
  job: { sessionId: string; questionId: string; timeoutMs?: number },
): Promise<void> {
  // An agent's question carries its own limit (STEPWISE_AGENT_ANSWER_TIMEOUT_MS).
  const timeoutMs = job.timeoutMs ?? deps.answerTimeoutMs;
  await inTransaction(deps.pool, async (client) => {
    const minutes = Math.max(1, Math.round(timeoutMs / 60_000));
    // An agent in plan mode asks through the same questions as the built-in planner.
    const external = await client.query("select 1 from planning_sessions where id = $1 and kind = 'external'", [
      job.sessionId,
    ]);
    const asker = external.rowCount ? "the agent's" : "the planner's";
    const message =
      timeoutMs >= 60_000
        ? `Nobody answered ${asker} question within ${minutes} minute${minutes === 1 ? "" : "s"}; planning was cancelled.`
        : `Nobody answered ${asker} question in time; planning was cancelled.`;
    const failure: SessionFailure = {
      status: "error",
      error_type: "timeout",
      message,
      kind: "answer_timeout",
      retryable: true,
    };
    let session: store.SessionRef;
    try {
      session = await store.timeOutQuestion(client, job.sessionId, job.questionId, failure);
    } catch (error) {
      // Answered, cancelled or ended meanwhile: the timer has nothing left to end.
      if (store.lostRace(error)) return;
      throw error;
    }
    await auditSession(client, session, {
      actor: "stepwise",
      action: "planning.timed_out",
      detail: { questionId: job.questionId, timeoutMs },
    });
    await emitTo(
      deps,
      session,
      [{ type: "planning.timed_out", data: { questionId: job.questionId, timeoutMs, message } }],
      client,
    );
  });
}

/**
 * Takes the session for this worker: it must be running and not held by another live worker —
 * one whose heartbeat (beaten on a connection of its own, see worker.ts) is fresh by the
 * database's clock. A session this process is running already is never claimed a second time
 * (`runSessionJob` checks first); its own id on a session it does not run (a loop that ended
 * without letting go) it takes back.
 */
async function claim(deps: PlannerDeps, sessionId: string, workerId: string): Promise<SessionRow | undefined> {
  if (!(await store.claimLoop(deps.pool, sessionId, workerId))) return undefined;
  return (await deps.prisma.planningSession.findUniqueOrThrow({ where: { id: sessionId } })) as SessionRow;
}

async function runSessionJob(
  deps: PlannerDeps,
  sessionId: string,
  workerId: string,
  running: Map<string, AbortController>,
): Promise<void> {
  // A second job for a session this process runs (a resume queued while the loop still ran) does
  // nothing. Marked running before the claim's first await, so two such jobs cannot both pass.
  if (running.has(sessionId)) return;
  const controller = new AbortController();
  running.set(sessionId, controller);
  let session: SessionRow | undefined;
  try {
    session = await claim(deps, sessionId, workerId);
  } finally {
    if (!session) running.delete(sessionId);
  }
  if (!session) return;
  const unsubscribe = deps.bus.subscribe(sessionId, (events: StoredEvent[]) => {
    if (events.some((event) => event.type === "planning.cancelled" || event.type === "planning.timed_out")) {
      controller.abort(new PlanningCancelled());
    }
  });
  try {
    await runSession(deps, session, workerId, controller);
  } finally {
    unsubscribe();
    running.delete(sessionId);
  }
}

/** Sets the phase, only while this worker holds the session. */
async function setPhase(deps: PlannerDeps, sessionId: string, workerId: string, phase: SessionPhase) {
  if (!(await store.setPhase(deps.pool, sessionId, workerId, phase))) throw new PlanningCancelled();
}

async function runSession(
  deps: PlannerDeps,
  session: SessionRow,
  workerId: string,
  controller: AbortController,
): Promise<void> {
  const sessionId = session.id;
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
      await store.saveDraft(deps.pool, sessionId, draft);
    },
    ask: (question, toolCallId) => askPerson(deps, session, workerId, question, toolCallId),
    loadState: async () => (session.loopState as DeepState | null) ?? null,
    messages: planningInbox(deps.pool, sessionId),
    saveState: async (state, phase) => {
      // Cancelled, or taken over by another worker after this one was judged dead: stop here.
      if (!(await store.saveLoopState(deps.pool, sessionId, workerId, state, phase))) throw new PlanningCancelled();
    },
  };
  try {
    const firstStart = session.phase === "queued";
    if (firstStart) {
      await emit("planning.started", {
        kind: session.kind,
        mode: session.mode,
        model: session.model,
        goal: session.goal,
        judge: session.useJudge,
      });
    } else {
      await emit("planning.resumed", { phase: session.phase });
    }
    await setPhase(deps, sessionId, workerId, session.mode === "deep" ? "gathering" : "drafting");
    const outcome = await draftPlan(deps, session, context);
    if (controller.signal.aborted) throw controller.signal.reason ?? new PlanningCancelled();
    if (outcome.kind === "invalid") {
      await finish(deps, session, (client) => store.markInvalid(client, sessionId, outcome.failure), {
        type: "planning.invalid",
        data: { details: outcome.failure.details },
      });
      return;
    }
    await setPhase(deps, sessionId, workerId, "submitted");
    await savePlan(deps, session, outcome);
  } catch (error) {
    const reason: unknown = controller.signal.reason;
    if (error instanceof PlanningParked) return;
    if (error instanceof PlanningReleased || reason instanceof PlanningReleased) {
      // Shutting down: another worker (or this one's next start) resumes from the saved state.
      await inTransaction(deps.pool, async (client) => {
        if (await store.releaseLoop(client, sessionId, workerId)) {
          await enqueuePlanningJob(client, sessionId, session.workspaceRoot);
        }
      });
      return;
    }
    if (error instanceof PlanningCancelled || controller.signal.aborted) {
      // cancelPlanning (or the timeout) already recorded the end; a lost claim ends nothing here.
      return;
    }
    const failure = failureOf(error);
    await finish(deps, session, (client) => store.fail(client, sessionId, failure), {
      type: "planning.failed",
      data: { ...failure },
    });
  }
}

/** Saves the accepted plan: a new plan (create) or a new version (regenerate). */
async function savePlan(
  deps: PlannerDeps,
  session: SessionRow,
  outcome: Extract<PlanningOutcome, { kind: "accepted" }>,
): Promise<void> {
  const sessionId = session.id;
  const { totals } = await getUsage(deps.prisma, { sessionId });
  const usage = { inputTokens: totals.inputTokens, outputTokens: totals.outputTokens };
  if (session.kind === "regenerate") {
    const { plan: saved } = await revisePlan(deps.prisma, deps.tools, {
      planId: session.planId!,
      baseVersion: session.baseVersion!,
      revise: () => outcome.draft as { steps: { id: string }[] },
      // A model that renames the steps it kept must not make them look removed and re-added.
      matchIdentity: true,
      source: "llm",
      author: session.actor,
      workspaceRoot: deps.workspaceRoot,
      changeNote: `Regenerated with feedback: ${(session.feedback ?? "").slice(0, 200)}`,
      model: session.model,
      usage,
    });
    await finish(
      deps,
      session,
      (client) => store.complete(client, sessionId, { planId: saved.id, resultVersion: saved.version }),
      { type: "planning.completed", data: { planId: saved.id, version: saved.version } },
    );
    return;
  }
  // A worker that died after saving the plan but before finishing left it under the session's trace.
  const existing = await deps.prisma.planVersion.findFirst({ where: { traceId: session.traceId, version: 1 } });
  const plan = existing
    ? { id: existing.planId, version: 1 }
    : await createPlan(deps.prisma, deps.tools, {
        draft: outcome.draft,
        source: "llm",
        author: session.actor,
        ...(session.workspaceId && { workspaceId: session.workspaceId }),
        workspaceRoot: deps.workspaceRoot,
        model: session.model,
        usage,
        traceId: session.traceId,
      });
  await deps.prisma.llmCall.updateMany({ where: { sessionId }, data: { planId: plan.id } });
  const finished = await finish(
    deps,
    session,
    (client) => store.complete(client, sessionId, { planId: plan.id, resultVersion: plan.version }),
    { type: "planning.completed", data: { planId: plan.id, version: plan.version } },
  );
  if (!finished) await store.linkPlan(deps.pool, sessionId, plan.id);
}

/**
 * Ends the session by `end` (a store transition) and announces it, in one transaction — only if
 * nobody (a cancel, a timeout) ended it first; false then.
 */
async function finish(
  deps: PlannerDeps,
  session: { id: string; traceId: string },
  end: (client: pg.PoolClient) => Promise<store.SessionRef>,
  event: NewEvent,
): Promise<boolean> {
  try {
    await inTransaction(deps.pool, async (client) => {
      await end(client);
      await emitTo(deps, session, [event], client);
    });
    return true;
  } catch (error) {
    if (store.lostRace(error)) return false;
    throw error;
  }
}

/**
 * Deep mode's ask_user. An answer already recorded for this call (the loop resumed after it) is
 * returned; otherwise the question is stored, the session parks, and its timer is queued, all in
 * one transaction, and the loop stops without holding its job.
 */
async function askPerson(
  deps: PlannerDeps,
  session: SessionRow,
  workerId: string,
  question: string,
  toolCallId: string,
): Promise<string> {
  const existing = await deps.prisma.planningQuestion.findFirst({ where: { sessionId: session.id, toolCallId } });
  if (existing?.answer) return existing.answer;
  const parked = await inTransaction(deps.pool, async (client) => {
    try {
      await store.askQuestion(client, session.id, { workerId });
    } catch (error) {
      // Cancelled, or taken over by another worker: this loop stops without asking.
      if (store.lostRace(error)) return undefined;
      throw error;
    }
    const questionId =
      existing?.id ??
      (
        await client.query<{ id: string }>(
          "insert into planning_questions (id, session_id, question, tool_call_id) values (gen_random_uuid(), $1, $2, $3) returning id",
          [session.id, question.slice(0, 4_000), toolCallId],
        )
      ).rows[0]!.id;
    // The deadline is the database's now() plus the timeout, never this process's clock.
    const deadline = await client.query<{ run_at: Date }>(
      "select now() + make_interval(secs => $1::float8 / 1000) as run_at",
      [deps.answerTimeoutMs],
    );
    await enqueuePlanningTimeout(client, { sessionId: session.id, questionId, runAt: deadline.rows[0]!.run_at });
    if (!existing) {
      await emitTo(deps, session, [{ type: "planning.question", data: { questionId, question } }], client);
    }
    return questionId;
  });
  if (!parked) throw new PlanningCancelled();
  throw new PlanningParked();
}
