import type pg from "pg";
import type { Statement } from "../db";
import { z } from "zod";
import { webhookFanoutQuery, WEBHOOK_TRIGGER_TYPES } from "../queue/jobs";
import { eventSchema } from "./event-schemas";
import { EVENTS_CHANNEL, type NewEvent, type StoredEvent } from "./types";

/** NOTIFY payloads are limited to 8000 bytes; stay well below. */
const MAX_INLINE_PAYLOAD = 7000;

type Queryable = Pick<pg.ClientBase, "query">;

/**
 * Under test (vitest sets NODE_ENV=test) or with STEPWISE_CHECK_EVENTS=1, every appended event is
 * checked against its schema (event-schemas.ts), so a test fails at the line that appends a wrong
 * one. The compiler already holds every literal emit site to the union; this catches data built at
 * runtime (spreads, casts). Not by default anywhere else: `stepwise worker` and the benchmarks
 * never set NODE_ENV, and the parse would cost every engine transaction there.
 */
const CHECK_EVENTS = process.env.NODE_ENV === "test" || process.env.STEPWISE_CHECK_EVENTS === "1";

/** Throws when `event` is not a member of the event union (an unknown type, or data that does not fit). */
export function assertValidEvent(event: NewEvent): void {
  const parsed = eventSchema.safeParse(event);
  if (!parsed.success) {
    // A programming error, not a caller's: a plain Error (a 500 at any door).
    throw new Error(`Event ${String(event.type)} does not match its schema: ${z.prettifyError(parsed.error)}`);
  }
}

/**
 * Appends events to a stream inside the caller's transaction. Bumping the stream's counter takes
 * a row lock held until commit, so concurrent writers of one stream commit in sequence order and
 * the sequence has no gaps. The NOTIFY is delivered only if the transaction commits.
 *
 * `alongside` adds writes of the caller's own (UPDATE/INSERT statements, each bound through
 * `bind`) to the same statement as data-modifying CTEs, saving their round trips: the engine's
 * per-transaction write-back rides here. They must not touch the event tables, and they see the
 * statement's snapshot, not each other's effects.
 */
export async function appendEvents(
  client: Queryable,
  stream: { streamId: string; planId: string; runId: string | null; traceId: string },
  events: NewEvent[],
  alongside?: AlongsideWrites,
): Promise<StoredEvent[]> {
  const statement = appendEventsStatement(stream, events, { alongside });
  if (!statement) return [];
  const result = await client.query<{ last_seq: number; created_at: string }>(statement.text, statement.values);
  return appended(stream, events, result);
}

/**
 * `appendEvents` as one statement, for a caller that sends it with others (the engine sends its
 * write-back and commit in one round trip). Undefined when there is nothing to write. Events a
 * webhook may be told about queue their fanout job in the same statement.
 *
 * `live: false` stores the events without the NOTIFY that pushes them to subscribers: for the
 * engine's routine transitions of a run nobody watches (see `EventBus.watch`). A subscriber reads
 * stored events when it starts and whenever it sees a gap, so nothing is lost, only not pushed.
 */
export function appendEventsStatement(
  stream: { streamId: string; planId: string; runId: string | null; traceId: string },
  events: NewEvent[],
  options: { alongside?: AlongsideWrites; live?: boolean } = {},
): Statement | undefined {
  const { alongside, live = true } = options;
  if (events.length === 0) {
    const params: unknown[] = [];
    const ctes = alongsideCtes(alongside, params);
    return ctes.length > 0 ? { text: `with ${ctes.join(", ")} select 1`, values: params } : undefined;
  }
  if (CHECK_EVENTS) events.forEach(assertValidEvent);
  const rows = JSON.stringify(
    events.map((event) => ({ type: event.type, step_id: event.stepId ?? null, data: event.data ?? {} })),
  );
  // Whether the events could travel in the notification, judged before building it: built in SQL
  // and found too long, a batch of a hundred events cost the statement several milliseconds.
  const perEvent =
    120 + stream.streamId.length * 2 + stream.planId.length + (stream.runId?.length ?? 4) + stream.traceId.length;
  const inline = rows.length + events.length * perEvent <= MAX_INLINE_PAYLOAD;
  const params: unknown[] = [
    stream.streamId,
    events.length,
    stream.planId,
    stream.runId,
    stream.traceId,
    rows,
    ...(live ? [EVENTS_CHANNEL] : []),
  ];
  const writes = alongsideCtes(alongside, params)
    .map((cte) => `${cte}, `)
    .join("");
  // Outgoing webhooks hear of these events through a queue job written with them, so a
  // notification exists if and only if what it tells of happened. A CTE that only selects runs
  // only if read: the final select counts its rows.
  const fanout = events.some((event) => WEBHOOK_TRIGGER_TYPES.includes(event.type))
    ? webhookFanoutQuery(bindTo(params), {
        streamId: "$1::text",
        fromSeq: "b.last_seq - $2 + 1",
        toSeq: "b.last_seq",
        from: "bumped b",
      })
    : undefined;
  const columns = `b.last_seq, b.created_at${fanout ? ", (select count(*) from fanout) as fanned_out" : ""}`;
  // One statement (one round trip, paid by every engine transaction): bump the stream's counter,
  // insert the events numbered from it, queue their webhook fanout, and queue the NOTIFY — the
  // events themselves when they fit, else only their range.
  //
  // Timestamps come from the database's clock, not this process's, so processes with skewed
  // clocks still stamp one stream's events in order: clock_timestamp(), read once the stream's
  // row lock is held (after the previous writer committed), rather than now() — the
  // transaction's start, which a transaction that waited for the lock would stamp before its
  // predecessor's events. Rounded to the column's milliseconds first, so the stamp sent live is
  // exactly the one stored and replayed.
  return {
    text: `with ${writes}bumped as (
       insert into event_streams (id, last_seq) values ($1, $2)
       on conflict (id) do update set last_seq = event_streams.last_seq + $2
       returning last_seq,
         to_char(clock_timestamp()::timestamptz(3) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') as created_at
     ),
     numbered as (
       select b.last_seq - $2 + e.ord::int as seq, e.type, e.step_id, coalesce(e.data, '{}'::jsonb) as data, b.created_at
       from bumped b,
         rows from (jsonb_to_recordset($6::jsonb) as (type text, step_id text, data jsonb))
           with ordinality as e(type, step_id, data, ord)
     ),
     inserted as (
       insert into events (stream_id, seq, type, plan_id, run_id, step_id, trace_id, data, created_at)
       select $1, seq, type, $3, $4::uuid, step_id, $5, data, created_at::timestamptz from numbered
     )${fanout ? `, fanout as (${fanout})` : ""}
     ${!live ? `select ${columns} from bumped b` : inline ? notifyEvents(columns) : notifyRange(columns)}`,
    values: params,
  };
}

/** The end of `appendEventsStatement` that pushes the events' range, for subscribers to read. */
const notifyRange = (columns: string) => `select ${columns},
       pg_notify($7, jsonb_build_object('streamId', $1::text, 'fromSeq', b.last_seq - $2 + 1, 'toSeq', b.last_seq)::text)
         is null as sent
     from bumped b`;

/** The end of `appendEventsStatement` that pushes the events themselves (their range if, after all, too long). */
const notifyEvents = (columns: string) => `, inline as (
       select jsonb_build_object('streamId', $1::text, 'events', jsonb_agg(jsonb_build_object(
         'streamId', $1::text, 'seq', seq, 'type', type, 'planId', $3::text, 'runId', $4::text,
         'stepId', step_id, 'traceId', $5::text, 'data', data, 'createdAt', created_at) order by seq))::text as payload
       from numbered
     )
     select ${columns}, pg_notify($7, case
         when octet_length(i.payload) <= ${MAX_INLINE_PAYLOAD} then i.payload
         else jsonb_build_object('streamId', $1::text, 'fromSeq', b.last_seq - $2 + 1, 'toSeq', b.last_seq)::text
       end) is null as sent
     from bumped b, inline i`;

/** The events `appendEventsStatement` wrote, from its result. */
export function appended(
  stream: { streamId: string; planId: string; runId: string | null; traceId: string },
  events: NewEvent[],
  result: pg.QueryResult,
): StoredEvent[] {
  if (events.length === 0) return [];
  const { last_seq: lastSeq, created_at: createdAt } = result.rows[0]!;
  const firstSeq = lastSeq - events.length + 1;
  return events.map(
    (event, index) =>
      ({
        streamId: stream.streamId,
        seq: firstSeq + index,
        type: event.type,
        planId: stream.planId,
        runId: stream.runId,
        stepId: event.stepId ?? null,
        traceId: stream.traceId,
        data: event.data,
        createdAt,
      }) as StoredEvent,
  );
}

/** Writes to run in the events' statement: `bind(value)` returns the placeholder for a parameter. */
export type AlongsideWrites = (bind: (value: unknown) => string) => string[];

/** `name as (statement)` for each write, its parameters appended to `params`. */
function alongsideCtes(alongside: AlongsideWrites | undefined, params: unknown[]): string[] {
  if (!alongside) return [];
  return alongside(bindTo(params)).map((statement, index) => `alongside_${index} as (${statement})`);
}

/** A `bind` that appends each value to `params` and returns its placeholder. */
function bindTo(params: unknown[]): (value: unknown) => string {
  return (value) => {
    params.push(value);
    return `$${params.length}`;
  };
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

/** A stored row as the event it is; rows were checked against the union when appended. */
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
  } as StoredEvent;
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
