import type { AppContext } from "../services";
import type { z } from "zod";
import { recordAudit } from "../audit/audit-log";
import { AppError } from "../errors";
import type { waitingSchema } from "./contract";
import { insertSession, sessionIdFor } from "./session-rows";

/**
 * An agent's `start` in a workspace whose approver policy says the author may not approve: the
 * agent wrote the session's plan, so its run cannot start on the agent's word. Instead of refusing
 * (which left the plan behind and a run that no session knew of once a person approved it), the
 * start is recorded as a request: the agent gets the session id at once, `status` says whose
 * approval it waits for, and the person's approval of the plan makes its run that session.
 */

type App = Pick<AppContext, "db">;

/** Whether `startRun` refused because the actor wrote the version and may not approve it. */
export function isAuthorRefusal(error: unknown, actor: string): boolean {
  return (
    error instanceof AppError &&
    error.code === "forbidden" &&
    (error.details as { author?: unknown } | undefined)?.author === actor
  );
}

export async function requestSession(
  app: App,
  input: {
    goal: string;
    workspaceRoot: string;
    planId: string;
    version: number;
    actor: string;
    agentConcurrency?: number;
    leaseSeconds?: number;
  },
): Promise<{ sessionId: string }> {
  const base = sessionIdFor(input.goal, new Date());
  for (let suffix = 1; ; suffix++) {
    const sessionId = suffix === 1 ? base : `${base}-${suffix}`;
    // The id must be free among sessions and requests alike: it becomes the session's.
    const inserted = await app.db.pool.query(
      `insert into agent_session_requests (plan_id, session_id, goal, workspace_root, created_by, agent_concurrency, lease_seconds)
       select $1, $2, $3, $4, $5, $6, $7
       where not exists (select 1 from agent_sessions where id = $2)
       on conflict do nothing`,
      [
        input.planId,
        sessionId,
        input.goal,
        input.workspaceRoot,
        input.actor,
        input.agentConcurrency ?? null,
        input.leaseSeconds ?? null,
      ],
    );
    if (inserted.rowCount) {
      return { sessionId };
    }
  }
}

export function waitingForApprovalMessage(author: string, planId: string): string {
  return `Waiting for a person other than ${author} to approve plan ${planId} (the workspace's approver policy: the author of a plan may not approve it). The session's run starts when they do.`;
}

interface RequestRow {
  plan_id: string;
  session_id: string;
  goal: string;
  created_by: string;
}

/**
 * `status` for a session that waits for its plan's approval: the named one, or — when none is
 * named — the caller's newest request, if it is newer than the caller's newest session.
 */
export async function pendingSessionStatus(
  app: App,
  sessionId: string | undefined,
  caller: string | undefined,
): Promise<z.infer<typeof waitingSchema> | undefined> {
  const rows = sessionId
    ? await app.db.pool.query<RequestRow>(
        "select plan_id, session_id, goal, created_by from agent_session_requests where session_id = $1 and attached_at is null",
        [sessionId],
      )
    : await app.db.pool.query<RequestRow>(
        `select r.plan_id, r.session_id, r.goal, r.created_by from agent_session_requests r
         where r.created_by = $1 and r.attached_at is null
           and not exists (select 1 from agent_sessions s where s.created_by = $1 and s.created_at > r.created_at)
         order by r.created_at desc limit 1`,
        [caller ?? ""],
      );
  const request = rows.rows[0];
  if (!request) return undefined;
  return {
    now: {
      reason: "waiting",
      agent_instructions:
        "Do not start work yet: the plan must be approved by someone else first. Ask again after retry_after_seconds.",
      message: waitingForApprovalMessage(request.created_by, request.plan_id),
      retry_after_seconds: 30,
      waiting_for: [{ task_id: null, title: `Approval of plan ${request.plan_id}`, state: "awaiting_plan_approval" }],
    },
    session: { id: request.session_id, goal: request.goal },
  };
}

/**
 * The run a person started by approving a requested session's plan becomes that session, with the
 * id the agent was given. Idempotent: a request already attached (or a run already a session's)
 * is left alone.
 */
export async function attachRequestedSession(
  app: App,
  input: { planId: string; version: number; runId: string; workspaceRoot: string; approvedBy: string },
): Promise<{ sessionId: string } | null> {
  const claimed = await app.db.pool.query<
    RequestRow & { workspace_root: string; agent_concurrency: number | null; lease_seconds: number | null }
  >(
    `update agent_session_requests set attached_at = now()
     where plan_id = $1 and attached_at is null
       and not exists (select 1 from agent_sessions where run_id = $2)
     returning plan_id, session_id, goal, created_by, workspace_root, agent_concurrency, lease_seconds`,
    [input.planId, input.runId],
  );
  const request = claimed.rows[0];
  if (!request) return null;
  const sessionId = await insertSession(app, {
    id: request.session_id,
    goal: request.goal,
    workspaceRoot: input.workspaceRoot,
    planId: input.planId,
    runId: input.runId,
    actor: request.created_by,
    ...(request.agent_concurrency !== null && { agentConcurrency: request.agent_concurrency }),
    ...(request.lease_seconds !== null && { leaseSeconds: request.lease_seconds }),
  });
  await recordAudit(app.db.pool, {
    actor: input.approvedBy,
    action: "agent_session.attached",
    planId: input.planId,
    planVersion: input.version,
    runId: input.runId,
    detail: { sessionId, agent: request.created_by },
  });
  return { sessionId };
}
