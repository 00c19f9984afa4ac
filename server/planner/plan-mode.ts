import { randomUUID } from "node:crypto";
import { z } from "zod";
import type { AppContext } from "../services";
import { inTransaction } from "../db";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import type { EventData, EventType, NewEvent } from "../events/types";
import type { StepInput } from "../plan-schema";
import { createPlan, getPlan } from "../plans/service";
import { revisePlan } from "../plans/versions";
import { AGENT_TASK_TOOL } from "../tools/agent-task";
import { recordAudit } from "../audit/audit-log";
import * as store from "./session-store";
import { scheduleAnswerTimeout, scheduleReviewTimeout, touchPlanMode } from "./plan-mode-timers";

/**
 * Seed 002's planning mode for an external agent (through MCP): the agent says it wants to plan
 * (`enter_plan_mode`), the person sees why in the browser, the agent gathers context with its own
 * read-only tools, asks the person (`ask_user`, answered in the browser), and submits a plan
 * (`submit_plan`) that the person approves, rejects or sends back with instructions in the review
 * page. It is a planning session like the built-in planner's (same page, same questions), of kind
 * `external`; its plan is a Stepwise plan of agent tasks.
 */
type App = Pick<AppContext, "db" | "tools" | "workspaceRoot">;

export const MAX_ANSWER_WAIT_SECONDS = 120;

export const enterPlanModeInput = z.object({
  reason: z.string().trim().min(1, "Say why you want to plan first").max(2_000),
});
export const askUserInput = z.object({
  question: z.string().trim().min(1, "A question is needed").max(2_000),
  /** How long to wait for the answer before returning a handle to poll with get_answer. */
  wait_seconds: z.number().int().min(0).max(MAX_ANSWER_WAIT_SECONDS).default(60),
});
export const getAnswerInput = z.object({
  question_id: z.uuid(),
  wait_seconds: z.number().int().min(0).max(MAX_ANSWER_WAIT_SECONDS).default(60),
});
export const submitPlanInput = z.object({
  summary: z.string().trim().min(1, "A plan needs a summary").max(10_000),
  steps: z
    .array(
      z.object({
        description: z.string().trim().min(1, "Every step needs a description").max(2_000),
        tools: z.array(z.string().min(1).max(100)).max(20).default([]),
        risk: z.enum(["low", "medium", "high"]).default("low"),
        // Seed 003's task fields, optional here: seed 002's plan has none. What the gates
        // (`checkPlanQuality`) find in a plan-mode plan is advice shown to the reviewer, not a refusal.
        context_hints: z
          .array(z.string().max(500))
          .max(20)
          .default([])
          .describe('Short, actionable instructions: "Read `spec.md` section 2"'),
        relevant_file_paths: z
          .array(z.string().min(1).max(500))
          .max(50)
          .default([])
          .describe("Files the step reads or changes (a file the step creates may be named)"),
        // Branching (issue 40), as plan_create names it: checked by the same plan-time checks,
        // which refuse a plan whose condition or list cannot be read; the review says them in words.
        when: z
          .string()
          .trim()
          .min(1)
          .max(1_000)
          .optional()
          .describe('Run the step only if this holds of earlier steps, e.g. `$step_1.status == "completed"`'),
        for_each: z
          .string()
          .trim()
          .max(200)
          .optional()
          .describe("Run the step once per element of an earlier step's list (`$item` in its text is the element)"),
        max_items: z.number().int().min(1).max(1_000).optional().describe("The most elements for_each may have"),
      }),
    )
    .min(1, "A plan needs at least one step")
    .max(200),
  questions: z.array(z.string().max(2_000)).max(50).default([]),
  context_notes: z.string().max(10_000).optional(),
});

interface SessionRow {
  id: string;
  status: string;
  goal: string;
  trace_id: string;
  plan_id: string | null;
}

async function emit<T extends EventType>(
  app: App,
  session: { id: string; trace_id: string },
  type: T,
  data: EventData<T>,
) {
  await appendEvents(
    app.db.pool,
    { streamId: session.id, planId: session.id, runId: null, traceId: session.trace_id },
    [{ type, data } as NewEvent],
  );
}

/** Who calls a plan-mode tool: the agent's name and, when one proved it, its named credential. */
type Caller = { actor: string; credential?: string | null };

async function openSession(app: App, sessionId: string, caller: Caller): Promise<SessionRow> {
  const rows = await app.db.pool.query<
    SessionRow & { actor: string; actor_credential: string | null; kind: string; failure: { message?: string } | null }
  >(
    "select id, status, goal, trace_id, plan_id, actor, actor_credential, kind, failure from planning_sessions where id = $1",
    [sessionId],
  );
  const session = rows.rows[0];
  // Another agent's session (another name, or the same name under another credential) is not found.
  if (
    !session ||
    session.kind !== "external" ||
    session.actor !== caller.actor ||
    session.actor_credential !== (caller.credential ?? null)
  ) {
    throw new AppError("not_found", "Not in plan mode: call enter_plan_mode first");
  }
  if (session.status === "cancelled") {
    throw new AppError("invalid_state", session.failure?.message ?? "The person cancelled this planning session");
  }
  return session;
}

export async function enterPlanMode(app: App, input: { reason: string } & Caller) {
  const id = randomUUID();
  const traceId = randomUUID();
  await store.createExternalSession(app.db.pool, {
    id,
    reason: input.reason,
    model: `agent ${input.actor}`,
    workspaceRoot: app.workspaceRoot,
    traceId,
    actor: input.actor,
    actorCredential: input.credential ?? null,
  });
  await emit(app, { id, trace_id: traceId }, "planning.started", {
    kind: "external",
    mode: "agent",
    model: `agent ${input.actor}`,
    reason: input.reason,
  });
  // Gathering that stops (the agent went away) ends after the idle limit.
  await touchPlanMode(app.db.pool, id);
  return {
    status: "plan_mode" as const,
    planning_session_id: id,
    message: `I'd like to plan this out before proceeding. Reason: ${input.reason}`,
    review_url: `/tasks/${id}`,
    agent_instructions:
      "Gather context with read-only tools only. Ask the person with ask_user when something is unclear, then submit_plan. Do not change anything until the plan is approved (plan_review_status).",
  };
}

/** Asks the person; waits up to `wait_seconds` for the answer, else returns a handle for get_answer. */
export async function askUser(
  app: App,
  input: { sessionId: string } & Caller & z.output<typeof askUserInput>,
  signal?: AbortSignal,
) {
  const session = await openSession(app, input.sessionId, input);
  const questionId = randomUUID();
  await inTransaction(app.db.pool, async (client) => {
    await client.query("insert into planning_questions (id, session_id, question) values ($1, $2, $3)", [
      questionId,
      session.id,
      input.question,
    ]);
    // Asked while still waiting for an earlier answer: the session simply waits on.
    if (session.status !== "awaiting_answer") await store.askQuestion(client, session.id);
    await scheduleAnswerTimeout(client, { sessionId: session.id, questionId });
  });
  await emit(app, session, "planning.question", { questionId, question: input.question });
  return waitForAnswer(app, { sessionId: session.id, questionId, waitSeconds: input.wait_seconds }, signal);
}

export async function getAnswer(
  app: App,
  input: { sessionId: string } & Caller & z.output<typeof getAnswerInput>,
  signal?: AbortSignal,
) {
  await openSession(app, input.sessionId, input);
  return waitForAnswer(
    app,
    { sessionId: input.sessionId, questionId: input.question_id, waitSeconds: input.wait_seconds },
    signal,
  );
}

async function waitForAnswer(
  app: App,
  input: { sessionId: string; questionId: string; waitSeconds: number },
  signal?: AbortSignal,
) {
  const deadline = Date.now() + input.waitSeconds * 1000;
  for (;;) {
    const rows = await app.db.pool.query<{
      answer: string | null;
      answered_by: string | null;
      status: string;
      failure: { message?: string } | null;
    }>(
      `select q.answer, q.answered_by, s.status, s.failure from planning_questions q join planning_sessions s on s.id = q.session_id
       where q.id = $1 and q.session_id = $2`,
      [input.questionId, input.sessionId],
    );
    const row = rows.rows[0];
    if (!row) throw new AppError("not_found", `No question ${input.questionId} in this planning session`);
    if (row.answer !== null) {
      // Back to gathering once every question is answered (a session that moved on meanwhile stays).
      if (row.status === "awaiting_answer") {
        await store.recordAnswer(app.db.pool, input.sessionId).catch((error: unknown) => {
          if (!store.lostRace(error)) throw error;
        });
      }
      return {
        status: "answered" as const,
        question_id: input.questionId,
        answer: row.answer,
        answered_by: row.answered_by,
      };
    }
    if (row.status === "cancelled") {
      throw new AppError("invalid_state", row.failure?.message ?? "The person cancelled this planning session");
    }
    if (Date.now() >= deadline || signal?.aborted) {
      return {
        status: "pending" as const,
        question_id: input.questionId,
        agent_instructions: "The person has not answered yet. Call get_answer with this question_id to keep waiting.",
      };
    }
    await new Promise((resolve) => setTimeout(resolve, 300));
  }
}

/**
 * The agent's plan goes to review: version 1 of a new Stepwise plan, or — after the person sent it
 * back with instructions — the next version of the same plan, so the review page shows the diff.
 */
export async function submitPlan(app: App, input: { sessionId: string } & Caller & z.output<typeof submitPlanInput>) {
  const session = await openSession(app, input.sessionId, input);
  const unanswered = await app.db.pool.query(
    "select 1 from planning_questions where session_id = $1 and answer is null",
    [session.id],
  );
  if (unanswered.rowCount)
    throw new AppError("invalid_state", "A question is still waiting for its answer (get_answer)");
  const steps: StepInput[] = input.steps.map((step, index) => ({
    id: `step_${index + 1}`,
    title: step.description.length > 200 ? `${step.description.slice(0, 199)}…` : step.description,
    description: step.description,
    tool: AGENT_TASK_TOOL,
    labels: step.tools,
    risk: step.risk,
    type: "chore",
    contextHints: step.context_hints,
    relevantFilePaths: step.relevant_file_paths,
    dependsOn: index === 0 ? [] : [`step_${index}`],
    ...branchingOf(step),
  }));
  const draft = {
    goal: session.goal,
    summary: input.summary,
    steps,
    questions: input.questions,
    ...(input.context_notes && { contextNotes: input.context_notes }),
  };
  let planId: string;
  let version: number;
  if (session.plan_id) {
    const current = await getPlan(app.db.prisma, session.plan_id);
    // The agent resubmits its whole list: steps it kept (or changed) keep their ids through the
    // one revision function, so the diff shows what changed and comments on untouched steps stay open.
    const drafted = steps.map((step, index) => ({
      ...step,
      id: `draft_${index + 1}`,
      dependsOn: index === 0 ? [] : [`draft_${index}`],
      ...(step.when !== undefined && { when: step.when.replace(/\$step_(\d+)\b/g, "$$draft_$1") }),
      ...(step.forEach !== undefined && { forEach: step.forEach.replace(/^\$step_(\d+)\b/, "$$draft_$1") }),
    }));
    const { plan: saved } = await revisePlan(app.db.prisma, app.tools, {
      planId: session.plan_id,
      baseVersion: current.version,
      revise: () => ({ ...draft, steps: drafted }),
      matchIdentity: true,
      qualityAdvisory: true,
      source: "agent",
      author: input.actor,
      workspaceRoot: app.workspaceRoot,
      changeNote: `${input.actor} revised the plan`,
    });
    planId = saved.id;
    version = saved.version;
  } else {
    const plan = await createPlan(app.db.prisma, app.tools, {
      draft,
      source: "agent",
      author: input.actor,
      traceId: session.trace_id,
      workspaceRoot: app.workspaceRoot,
      qualityAdvisory: true,
    });
    planId = plan.id;
    version = plan.version;
  }
  await store.submitPlan(app.db.pool, session.id, { planId, resultVersion: version });
  // A resubmission after the agent left plan mode is planning again: the agent waits for review.
  await store.markPlanModeHeld(app.db.pool, session.id);
  await emit(app, session, "planning.completed", { planId, version });
  await scheduleReviewTimeout(app.db.pool, { sessionId: session.id, planId, version });
  return {
    status: "submitted" as const,
    plan_id: planId,
    version,
    review_url: `/plans/${planId}`,
    agent_instructions:
      "The plan waits for the person's review. Call plan_review_status with wait_seconds to learn whether it was approved, rejected, or sent back with instructions.",
  };
}

/** A submitted step's condition and fan-out as the plan schema names them (each instance's task shows its element). */
function branchingOf(step: z.output<typeof submitPlanInput>["steps"][number]): Partial<StepInput> {
  return {
    ...(step.when !== undefined && { when: step.when }),
    ...(step.for_each !== undefined && { forEach: step.for_each }),
    ...(step.max_items !== undefined && { maxItems: step.max_items }),
  };
}

export const exitPlanModeInput = z.object({
  reason: z.string().trim().max(2_000).default(""),
});

/**
 * The agent leaves plan mode without waiting for a decision: a session still gathering ends as
 * cancelled (audited, shown on its page); a plan already submitted stays for the person's review.
 */
export async function exitPlanMode(
  app: App,
  input: { sessionId: string } & Caller & z.output<typeof exitPlanModeInput>,
) {
  const session = await openSession(app, input.sessionId, input);
  const open = session.status === "running" || session.status === "awaiting_answer";
  const ended = open
    ? await store.cancel(app.db.pool, session.id).catch((error: unknown) => {
        // Submitted or ended in the meantime: nothing left to cancel.
        if (store.lostRace(error)) return null;
        throw error;
      })
    : null;
  if (ended) {
    await recordAudit(app.db.pool, {
      actor: input.actor,
      action: "planning.exited",
      planId: session.plan_id ?? session.id,
      detail: { sessionId: session.id, ...(input.reason && { reason: input.reason }) },
    });
    await emit(app, session, "planning.cancelled", { by: input.actor });
  } else {
    // The plan stays for review, but the agent is no longer held read-only by it.
    await store.markPlanModeLeft(app.db.pool, session.id);
    await recordAudit(app.db.pool, {
      actor: input.actor,
      action: "planning.exited",
      planId: session.plan_id ?? session.id,
      detail: { sessionId: session.id, planWaitsForReview: true, ...(input.reason && { reason: input.reason }) },
    });
  }
  return {
    status: "exited" as const,
    planning_session_id: session.id,
    message: ended
      ? "Left plan mode; the planning session is cancelled."
      : "Left plan mode; the submitted plan still waits for the person's review.",
  };
}
