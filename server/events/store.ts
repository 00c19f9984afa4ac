import type pg from "pg";
import { EVENTS_CHANNEL, type EventNotification, type NewEvent, type StoredEvent } from "./types";

/** NOTIFY payloads are limited to 8000 bytes; stay well below. */
const MAX_INLINE_PAYLOAD = 7000;

type Queryable = Pick<pg.ClientBase, "query">;

/**
 * Appends events to a stream inside the caller's transaction. Bumping the stream's counter takes
 * a row lock held until commit, so concurrent writers of one stream commit in sequence order and
 * the sequence has no gaps. The NOTIFY is delivered only if the transaction commits.
 */
export async function appendEvents(
  client: Queryable,
  stream: { streamId: string; planId: string; runId: string | null; traceId: string },
  events: NewEvent[],
): Promise<StoredEvent[]> {
  if (events.length === 0) return [];
  // Timestamps come from the database's clock, not this process's, so processes with skewed clocks
  // still stamp one stream's events in order. clock_timestamp(), read once the stream's row lock
  // is held (after the previous writer committed), rather than now() — the transaction's start,
  // which a transaction that waited for the lock would stamp before its predecessor's events.
  const bumped = await client.query<{ last_seq: number; now: Date | string }>(
    `insert into event_streams (id, last_seq) values ($1, $2)
     on conflict (id) do update set last_seq = event_streams.last_seq + $2
     returning last_seq, clock_timestamp() as now`,
    [stream.streamId, events.length],
  );
  const lastSeq = bumped.rows[0]!.last_seq;
  const firstSeq = lastSeq - events.length + 1;
  const now = new Date(bumped.rows[0]!.now).toISOString();
  const stored: StoredEvent[] = events.map((event, index) => ({
    streamId: stream.streamId,
    seq: firstSeq + index,
    type: event.type,
    planId: stream.planId,
    runId: stream.runId,
    stepId: event.stepId ?? null,
    traceId: stream.traceId,
    data: event.data ?? {},
    createdAt: now,
  }));
  await client.query(
    `insert into events (stream_id, seq, type, plan_id, run_id, step_id, trace_id, data, created_at)
     select $1, s.seq, s.type, $2, $3::uuid, s.step_id, $4, s.data, $5::timestamptz
     from jsonb_to_recordset($6::jsonb) as s(seq int, type text, step_id text, data jsonb)`,
    [
      stream.streamId,
      stream.planId,
      stream.runId,
      stream.traceId,
      now,
      JSON.stringify(stored.map((e) => ({ seq: e.seq, type: e.type, step_id: e.stepId, data: e.data }))),
    ],
  );
  let payload = JSON.stringify({ streamId: stream.streamId, events: stored } satisfies EventNotification);
  if (payload.length > MAX_INLINE_PAYLOAD) {
    payload = JSON.stringify({
      streamId: stream.streamId,
      fromSeq: firstSeq,
      toSeq: lastSeq,
    } satisfies EventNotification);
  }
  // Selecting a constant rather than pg_notify's void keeps this usable through Prisma raw queries.
  await client.query("select 1 as sent from (select pg_notify($1, $2)) as notified", [EVENTS_CHANNEL, payload]);
  return stored;
}

/** An `events` row as `select *` returns it. */
export interface EventRow {
  stream_id: string;
  seq: number;
  type: string;
  plan_id: string;
  run_id: string | null;
  step_id: string | null;
  trace_id: string;
  data: Record<string, unknown>;
  created_at: Date;
}

export function toStoredEvent(row: EventRow): StoredEvent {
  return {
    streamId: row.stream_id,
    seq: row.seq,
    type: row.type,
    planId: row.plan_id,
    runId: row.run_id,
    stepId: row.step_id,
    traceId: row.trace_id,
    data: row.data,
    createdAt: row.created_at.toISOString(),
  };
}

/** Events of a stream after `afterSeq`, in order, up to `toSeq` when given. */
export async function readEvents(
  client: Queryable,
  streamId: string,
  afterSeq: number,
  toSeq?: number,
): Promise<StoredEvent[]> {
  const result = await client.query<EventRow>(
    `select * from events where stream_id = $1 and seq > $2 and ($3::int is null or seq <= $3) order by seq`,
    [streamId, afterSeq, toSeq ?? null],
  );
  return result.rows.map(toStoredEvent);
}

/** Every event about a plan: its own stream and its runs' streams, in time order. */
export async function readPlanEvents(client: Queryable, planId: string): Promise<StoredEvent[]> {
  const result = await client.query<EventRow>(
    `select * from events where plan_id = $1 order by created_at, stream_id, seq`,
    [planId],
  );
  return result.rows.map(toStoredEvent);
}
