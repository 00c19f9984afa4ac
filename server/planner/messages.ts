import type pg from "pg";
import { AppError } from "../errors";
import { appendEvents } from "../events/store";
import { auditSession, MAX_FEEDBACK_CHARS, OPEN_STATUSES, type SessionStatus } from "./session-rules";
import { inTransaction } from "../db";

/**
 * Seed 002: "if a new message arrives during planning, it becomes part of the planning context".
 * A person adds a message to an open planning session; the built-in planner's next model call
 * gets every message not yet delivered (server/planner/planning.ts), and an agent in plan mode
 * gets them with its next tool call's answer (server/mcp/plan-mode-tools.ts). A message is marked
 * delivered only after the transcript that carries it is saved, so a restart repeats, never loses it.
 */
export interface PlanningMessage {
  id: string;
  message: string;
  author: string;
  createdAt: string;
  deliveredAt: string | null;
}

export async function addPlanningMessage(
  pool: pg.Pool,
  input: { sessionId: string; message: string; actor: string },
): Promise<{ messageId: string }> {
  const message = input.message.trim();
  if (!message) throw new AppError("invalid_input", "The message is empty");
  if (message.length > MAX_FEEDBACK_CHARS) {
    throw new AppError(
      "payload_too_large",
      `The message is ${message.length} characters; the limit is ${MAX_FEEDBACK_CHARS}`,
    );
  }
  return inTransaction(pool, async (client) => {
    const rows = await client.query<{ id: string; status: SessionStatus; plan_id: string | null; trace_id: string }>(
      "select id, status, plan_id, trace_id from planning_sessions where id = $1 for update",
      [input.sessionId],
    );
    const session = rows.rows[0];
    if (!session) throw new AppError("not_found", `No planning session ${input.sessionId}`);
    if (!OPEN_STATUSES.includes(session.status)) {
      throw new AppError(
        "invalid_state",
        `The planning session is ${session.status}; messages join only while it plans`,
      );
    }
    const inserted = await client.query<{ id: string }>(
      "insert into planning_messages (id, session_id, message, author) values (gen_random_uuid(), $1, $2, $3) returning id",
      [session.id, message, input.actor],
    );
    const messageId = inserted.rows[0]!.id;
    await auditSession(
      client,
      { id: session.id, planId: session.plan_id },
      {
        actor: input.actor,
        action: "planning.message",
        detail: { messageId, message },
      },
    );
    await appendEvents(client, { streamId: session.id, planId: session.id, runId: null, traceId: session.trace_id }, [
      { type: "planning.message", data: { messageId, message, by: input.actor } },
    ]);
    return { messageId };
  });
}

/** Messages the planner (or the agent) has not seen yet, oldest first. */
export async function undeliveredMessages(pool: Pick<pg.Pool, "query">, sessionId: string): Promise<PlanningMessage[]> {
  const rows = await pool.query<{ id: string; message: string; author: string; created_at: Date }>(
    "select id, message, author, created_at from planning_messages where session_id = $1 and delivered_at is null order by created_at, id",
    [sessionId],
  );
  return rows.rows.map((row) => ({
    id: row.id,
    message: row.message,
    author: row.author,
    createdAt: row.created_at.toISOString(),
    deliveredAt: null,
  }));
}

export async function markDelivered(pool: Pick<pg.Pool, "query">, ids: string[]): Promise<void> {
  if (ids.length === 0) return;
  await pool.query(
    "update planning_messages set delivered_at = now() where id = any($1::uuid[]) and delivered_at is null",
    [ids],
  );
}

export async function listPlanningMessages(
  pool: Pick<pg.Pool, "query">,
  sessionId: string,
): Promise<PlanningMessage[]> {
  const rows = await pool.query<{
    id: string;
    message: string;
    author: string;
    created_at: Date;
    delivered_at: Date | null;
  }>(
    "select id, message, author, created_at, delivered_at from planning_messages where session_id = $1 order by created_at, id",
    [sessionId],
  );
  return rows.rows.map((row) => ({
    id: row.id,
    message: row.message,
    author: row.author,
    createdAt: row.created_at.toISOString(),
    deliveredAt: row.delivered_at?.toISOString() ?? null,
  }));
}

/** How a message reads in the model's (or the agent's) context. */
export function messageForContext(message: Pick<PlanningMessage, "message" | "author">): string {
  return `A new message from ${message.author} while you plan (take it into account): ${message.message}`;
}

/** The planning loop's view: take the messages to add, then confirm once the transcript is saved. */
export function planningInbox(pool: pg.Pool, sessionId: string) {
  return {
    pending: () => undeliveredMessages(pool, sessionId),
    delivered: (ids: string[]) => markDelivered(pool, ids),
  };
}
