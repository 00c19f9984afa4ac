import type pg from "pg";
import { describeApprovals, type ApprovalView } from "../engine/approval-view";
import type { ToolRegistry } from "../tools/registry";
import { awaitsPersonReview, loadReviewFacts } from "../planner/review-state";
import { FINISHED_RUN_STATUSES, WAITING_FOR_PERSON_STEP_STATUSES } from "../vocabulary";

/**
 * Everything that waits for a person, anywhere, in one list: planning questions awaiting an
 * answer, plans from planning sessions awaiting review, gated steps awaiting approval, run
 * questions (`ask_user`) awaiting input, and blockers agents raised in their sessions. Each item
 * names where it is decided. Read straight from the rows that define each wait, so the list
 * cannot disagree with the pages it links to.
 */
export type InboxItem =
  | {
      kind: "planning_question";
      id: string;
      sessionId: string;
      questionId: string;
      question: string;
      goal: string;
      external: boolean;
      since: string;
      href: string;
    }
  | {
      kind: "plan_review";
      id: string;
      planId: string;
      version: number;
      goal: string;
      sessionId: string | null;
      since: string;
      href: string;
    }
  | {
      kind: "step_approval";
      id: string;
      runId: string;
      stepId: string;
      title: string;
      goal: string;
      /** Exactly what approving lets run: arguments resolved, risk and capability computed. */
      approval: ApprovalView | null;
      expiresAt: string | null;
      since: string;
      href: string;
    }
  | {
      kind: "step_input";
      id: string;
      runId: string;
      stepId: string;
      question: string;
      choices: string[] | null;
      goal: string;
      since: string;
      href: string;
    }
  | {
      kind: "agent_blocker";
      id: string;
      sessionId: string;
      runId: string | null;
      message: string;
      goal: string;
      raisedBy: string;
      since: string;
      href: string;
    }
  | {
      /**
       * A notice, not a wait: something that waited ended by its timeout (seed 002: cancel and
       * notify) within the last day. Not counted as waiting for the person.
       */
      kind: "timed_out";
      id: string;
      action: string;
      message: string;
      since: string;
      href: string;
    };

export type InboxKind = InboxItem["kind"];

const iso = (value: Date) => value.toISOString();

async function planningQuestions(pool: pg.Pool): Promise<InboxItem[]> {
  const rows = await pool.query<{
    session_id: string;
    question_id: string;
    question: string;
    goal: string;
    kind: string;
    asked_at: Date;
  }>(
    `select s.id as session_id, q.id as question_id, q.question, s.goal, s.kind, q.asked_at
       from planning_questions q join planning_sessions s on s.id = q.session_id
      where q.answer is null and s.status = 'awaiting_answer'
      order by q.asked_at`,
  );
  return rows.rows.map((row) => ({
    kind: "planning_question" as const,
    id: `question:${row.question_id}`,
    sessionId: row.session_id,
    questionId: row.question_id,
    question: row.question,
    goal: row.goal,
    external: row.kind === "external",
    since: iso(row.asked_at),
    href: `/tasks/${row.session_id}`,
  }));
}

/**
 * Plans a planning session produced whose current version waits for the person's decision —
 * `awaitsPersonReview` (review-state.ts), the rule the planning list's "waiting for you" uses too.
 */
async function plansToReview(pool: pg.Pool): Promise<InboxItem[]> {
  const rows = await pool.query<{ plan_id: string; current_version: number; goal: string; updated_at: Date }>(
    `select p.id as plan_id, p.current_version, v.goal, p.updated_at
       from plans p
       join plan_versions v on v.plan_id = p.id and v.version = p.current_version
      where exists (select 1 from planning_sessions s where s.plan_id = p.id and s.status = 'completed')
      order by p.updated_at`,
  );
  const reviews = await loadReviewFacts(
    pool,
    rows.rows.map((row) => ({ planId: row.plan_id })),
  );
  return rows.rows.flatMap((row) => {
    const facts = reviews.get(row.plan_id);
    if (!facts || !awaitsPersonReview(facts)) return [];
    return [
      {
        kind: "plan_review" as const,
        id: `plan:${row.plan_id}:${row.current_version}`,
        planId: row.plan_id,
        version: row.current_version,
        goal: row.goal,
        sessionId: facts.reviewSessionId,
        since: iso(row.updated_at),
        href: `/plans/${row.plan_id}`,
      },
    ];
  });
}

async function waitingSteps(pool: pg.Pool, tools: ToolRegistry): Promise<InboxItem[]> {
  const rows = await pool.query<{
    run_id: string;
    plan_id: string;
    plan_version: number;
    workspace_root: string;
    step_id: string;
    status: string;
    waiting: { expiresAt?: string; question?: string; choices?: string[] } | null;
    steps: { id: string; title?: string; description?: string }[];
    goal: string;
    since: Date;
  }>(
    `select rs.run_id, r.plan_id, r.plan_version, r.workspace_root, rs.step_id, rs.status, rs.waiting, v.steps, v.goal,
            coalesce(r.started_at, r.created_at) as since
       from run_steps rs
       join runs r on r.id = rs.run_id
       join plan_versions v on v.plan_id = r.plan_id and v.version = r.plan_version
      where rs.status = any($1) and r.status <> all($2)
      order by since`,
    [WAITING_FOR_PERSON_STEP_STATUSES, FINISHED_RUN_STATUSES],
  );
  // What each approval would let run, computed per run (one read of its referenced outputs).
  const approvals = new Map<string, ApprovalView>();
  const byRun = new Map<string, (typeof rows.rows)[number][]>();
  for (const row of rows.rows) {
    if (row.status !== "awaiting_approval") continue;
    byRun.set(row.run_id, [...(byRun.get(row.run_id) ?? []), row]);
  }
  for (const [runId, runRows] of byRun) {
    const first = runRows[0]!;
    const views = await describeApprovals(
      pool,
      tools,
      { id: runId, planId: first.plan_id, planVersion: first.plan_version, workspaceRoot: first.workspace_root },
      runRows.map((row) => row.step_id),
    );
    for (const [stepId, view] of views) approvals.set(`${runId}:${stepId}`, view);
  }
  return rows.rows.map((row) => {
    const step = row.steps.find((candidate) => candidate.id === row.step_id);
    const title = step?.title ?? step?.description ?? row.step_id;
    const href = `/runs/${row.run_id}#step-${row.step_id}`;
    if (row.status === "awaiting_approval") {
      return {
        kind: "step_approval" as const,
        id: `approval:${row.run_id}:${row.step_id}`,
        runId: row.run_id,
        stepId: row.step_id,
        title,
        goal: row.goal,
        approval: approvals.get(`${row.run_id}:${row.step_id}`) ?? null,
        expiresAt: row.waiting?.expiresAt ?? null,
        since: iso(row.since),
        href,
      };
    }
    return {
      kind: "step_input" as const,
      id: `input:${row.run_id}:${row.step_id}`,
      runId: row.run_id,
      stepId: row.step_id,
      question: row.waiting?.question ?? title,
      choices: row.waiting?.choices ?? null,
      goal: row.goal,
      since: iso(row.since),
      href,
    };
  });
}

async function agentBlockers(pool: pg.Pool): Promise<InboxItem[]> {
  const rows = await pool.query<{
    seq: string;
    session_id: string;
    run_id: string | null;
    message: string;
    goal: string;
    raised_by: string;
    raised_at: Date;
  }>(
    `select g.seq::text as seq, g.session_id, a.run_id, g.message, a.goal, g.raised_by, g.raised_at
       from signals g join agent_sessions a on a.id = g.session_id
      where g.cleared_at is null and g.level = 'blocker'
      order by g.raised_at`,
  );
  return rows.rows.map((row) => ({
    kind: "agent_blocker" as const,
    id: `blocker:${row.seq}`,
    sessionId: row.session_id,
    runId: row.run_id,
    message: row.message,
    goal: row.goal,
    raisedBy: row.raised_by,
    since: iso(row.raised_at),
    href: row.run_id ? `/runs/${row.run_id}` : `/runs`,
  }));
}

/** Timeouts that ended a wait on a person or an agent in the last day, as audited. */
export const TIMEOUT_ACTIONS = ["planning.timed_out", "plan.review_timed_out", "todo.abandoned"];

async function timeouts(pool: pg.Pool): Promise<InboxItem[]> {
  const rows = await pool.query<{
    id: string;
    action: string;
    plan_id: string;
    run_id: string | null;
    detail: { message?: string; reason?: string; sessionId?: string };
    at: Date;
  }>(
    `select id::text, action, plan_id, run_id, detail, created_at as at from audit_entries
     where action = any($1) and created_at > now() - interval '1 day' order by id`,
    [TIMEOUT_ACTIONS],
  );
  return rows.rows.map((row) => ({
    kind: "timed_out" as const,
    id: `timeout:${row.id}`,
    action: row.action,
    message:
      row.detail.message ??
      (row.action === "todo.abandoned"
        ? `An agent's todo plan ended with its MCP session (${row.detail.reason ?? "closed"}).`
        : row.action),
    since: iso(row.at),
    href: row.run_id
      ? `/runs/${row.run_id}`
      : row.detail.sessionId
        ? `/tasks/${row.detail.sessionId}`
        : `/plans/${row.plan_id}`,
  }));
}

/** Oldest wait first: the one that has waited longest is the first to decide. Notices come last. */
export async function listInbox(pool: pg.Pool, tools: ToolRegistry): Promise<{ items: InboxItem[]; count: number }> {
  const groups = await Promise.all([
    planningQuestions(pool),
    plansToReview(pool),
    waitingSteps(pool, tools),
    agentBlockers(pool),
  ]);
  const items = groups.flat().sort((a, b) => a.since.localeCompare(b.since));
  const notices = (await timeouts(pool)).reverse();
  return { items: [...items, ...notices], count: items.length };
}
