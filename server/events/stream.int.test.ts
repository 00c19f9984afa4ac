import { randomUUID } from "node:crypto";
import { setTimeout as delay } from "node:timers/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { inTransaction } from "../db";
import { appendEvents, readEvents } from "./store";
import { streamEvents } from "./stream";
import type { StoredEvent } from "./types";

/**
 * The replay-then-live hand-over of `streamEvents` on real PostgreSQL: whatever moment a
 * subscriber joins, and whatever goes wrong with notifications, it yields every event after its
 * starting point exactly once, in order.
 */

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(async () => {
  await harness?.close();
});

const streamFor = (streamId: string) => ({ streamId, planId: "plan-stream-test", runId: null, traceId: "trace" });

/** `count` events (log lines: the event a chatty step appends most), each line prefixed with `text`. */
async function append(streamId: string, count: number, text = ""): Promise<StoredEvent[]> {
  return inTransaction(harness.app.db.pool, (client) =>
    appendEvents(
      client,
      streamFor(streamId),
      Array.from({ length: count }, (_, i) => ({
        type: "step.log" as const,
        stepId: "step_1",
        data: { lines: [{ message: `${text}${i}`, level: "info", at: "2026-01-01T00:00:00.000Z" }] },
      })),
    ),
  );
}

/**
 * Collects a subscription's events until it has `until` or the time runs out; then stops it. The
 * time is a backstop below the test's own timeout, generous for a busy machine.
 */
async function collect(streamId: string, afterSeq: number, until: number, timeoutMs = 45_000): Promise<number[]> {
  const abort = new AbortController();
  const seqs: number[] = [];
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  try {
    for await (const event of streamEvents(harness.app.bus, harness.app.db.pool, streamId, afterSeq, abort.signal)) {
      seqs.push(event.seq);
      if (event.seq >= until) break;
    }
  } finally {
    clearTimeout(timer);
    abort.abort();
  }
  return seqs;
}

const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => from + i);

describe("streamEvents", () => {
  it("hands over from replay to live without a gap or a duplicate while several writers commit", async () => {
    const streamId = `stream-${randomUUID()}`;
    const writers = 4;
    const transactionsPerWriter = 60;
    // Each transaction appends 1–3 events; the total is known up front.
    const sizes = Array.from({ length: writers * transactionsPerWriter }, (_, i) => (i % 3) + 1);
    const total = sizes.reduce((a, b) => a + b, 0);
    await append(streamId, 5); // history before anyone subscribes

    const subscribers: Promise<number[]>[] = [collect(streamId, 0, total + 5)];
    const writing = Promise.all(
      Array.from({ length: writers }, async (_, w) => {
        for (let t = 0; t < transactionsPerWriter; t++) {
          await append(streamId, sizes[w * transactionsPerWriter + t]!, `writer ${w}: `);
          // Subscribers join mid-write, each from what was committed when it joined.
          if (w === 0 && t % 15 === 7) {
            const committed = await harness.app.db.pool.query<{ last_seq: number }>(
              "select last_seq from event_streams where id = $1",
              [streamId],
            );
            const from = committed.rows[0]!.last_seq - (t % 2 === 0 ? 0 : 3);
            subscribers.push(collect(streamId, from, total + 5).then((seqs) => [from, ...seqs]));
          }
        }
      }),
    );
    await writing;
    const [fromStart, ...joined] = await Promise.all(subscribers);
    expect(fromStart).toEqual(range(1, total + 5));
    expect(joined.length).toBeGreaterThanOrEqual(4);
    for (const [from, ...seqs] of joined) expect(seqs).toEqual(range(from! + 1, total + 5));
  });

  it("fills a gap from the table when a notification never arrives", async () => {
    const streamId = `stream-${randomUUID()}`;
    await append(streamId, 2);
    const subscriber = collect(streamId, 0, 6);
    await delay(200);
    // Two events committed without a NOTIFY, as if the notification had been lost.
    await harness.app.db.pool.query(
      `with bumped as (update event_streams set last_seq = last_seq + 2 where id = $1 returning last_seq)
       insert into events (stream_id, seq, type, plan_id, trace_id, data)
       select $1, s, 'test.silent', 'plan-stream-test', 'trace', '{}'::jsonb
       from bumped, generate_series(bumped.last_seq - 1, bumped.last_seq) as s`,
      [streamId],
    );
    await append(streamId, 2);
    expect(await subscriber).toEqual(range(1, 6));
  });

  it("reads batches too large to travel in the notification from the table", async () => {
    const streamId = `stream-${randomUUID()}`;
    const subscriber = collect(streamId, 0, 12);
    await delay(200);
    await append(streamId, 2);
    await append(streamId, 10, "x".repeat(2_000)); // ~20 kB: only the range is notified
    expect(await subscriber).toEqual(range(1, 12));
  });

  it("catches up on what was committed while the LISTEN connection was down", async () => {
    const streamId = `stream-${randomUUID()}`;
    await append(streamId, 3);
    const subscriber = collect(streamId, 0, 3 + 40);
    await delay(200);
    const writing = (async () => {
      for (let i = 0; i < 40; i++) {
        await append(streamId, 1);
        await delay(25);
      }
    })();
    await delay(150);
    // Cut the bus's LISTEN connection from the server side, mid-write.
    const killed = await harness.app.db.pool.query(
      "select pg_terminate_backend(pid) from pg_stat_activity where query ilike 'listen %' and pid <> pg_backend_pid()",
    );
    expect(killed.rowCount).toBeGreaterThan(0);
    await writing;
    expect(await subscriber).toEqual(range(1, 43));
  });

  it("stops and unsubscribes when its signal aborts", async () => {
    const streamId = `stream-${randomUUID()}`;
    await append(streamId, 1);
    const abort = new AbortController();
    const seen: number[] = [];
    const iteration = (async () => {
      for await (const event of streamEvents(harness.app.bus, harness.app.db.pool, streamId, 0, abort.signal)) {
        seen.push(event.seq);
      }
    })();
    // The first event arrives, however long the machine takes to deliver it; then the abort.
    await expect.poll(() => seen, { timeout: 45_000 }).toEqual([1]);
    abort.abort();
    await iteration;
    await append(streamId, 1);
    await delay(200);
    expect(seen).toEqual([1]);
  });
});

/** A server-side caller sees `tracked()` envelopes as [id, data] tuples; clients get {id, data}. */
function unwrap(tracked: unknown): { id: string; data: StoredEvent } {
  if (Array.isArray(tracked)) return { id: tracked[0] as string, data: tracked[1] as StoredEvent };
  return tracked as { id: string; data: StoredEvent };
}

describe("runs.events subscription", () => {
  it("resumes from the last tracked id with nothing missed or repeated", async () => {
    const plan = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "resume",
        steps: [{ id: "step_1", description: "gate", tool: "echo", args: { value: 1 }, approvalRequired: true }],
      }),
    });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    const first: string[] = [];
    // Leaving a for-await loop returns the iterator, which ends the subscription.
    const subscription = await harness.caller.runs.events({ runId, lastEventId: null });
    for await (const tracked of subscription) {
      const { id, data } = unwrap(tracked);
      first.push(id);
      if (data.type === "approval.requested") break;
    }
    // The run moves on while nobody listens.
    await harness.caller.runs.cancel({ runId });
    const resumed: string[] = [];
    const again = await harness.caller.runs.events({ runId, lastEventId: first.at(-1)! });
    for await (const tracked of again) {
      const { id, data } = unwrap(tracked);
      resumed.push(id);
      if (data.type === "run.cancelled") break;
    }
    const all = [...first, ...resumed].map(Number);
    expect(all).toEqual(range(1, all.length));
    expect(resumed.length).toBeGreaterThan(0);
  });
});

describe("appendEvents timestamps", () => {
  it("stamps a stream's events in sequence order even when an earlier transaction waited for the stream", async () => {
    const streamId = `stream-${randomUUID()}`;
    await append(streamId, 1);
    const early = await harness.app.db.pool.connect();
    try {
      // `early` starts its transaction first, then waits while another writer appends and commits.
      await early.query("begin");
      await early.query("select 1");
      await delay(50);
      const [middle] = await append(streamId, 1);
      const [late] = await appendEvents(early, streamFor(streamId), [{ type: "planning.cancelled", data: {} }]);
      await early.query("commit");
      expect(late!.seq).toBe(middle!.seq + 1);
      expect(Date.parse(late!.createdAt)).toBeGreaterThanOrEqual(Date.parse(middle!.createdAt));
    } finally {
      early.release();
    }
  });
});

describe("appendEvents notifications", () => {
  it("sends live exactly the events the table replays, field for field", async () => {
    const streamId = `stream-${randomUUID()}`;
    const live = new Promise<StoredEvent[]>((resolve) => {
      const unsubscribe = harness.app.bus.subscribe(streamId, (events) => {
        unsubscribe();
        resolve(events);
      });
    });
    const returned = await inTransaction(harness.app.db.pool, (client) =>
      appendEvents(client, { ...streamFor(streamId), runId: randomUUID() }, [
        {
          type: "plan.step",
          stepId: "step_1",
          data: { step: { text: 'é ✓ "quoted"', nested: { n: 1.5, list: [null, true] } } },
        },
        { type: "planning.cancelled", data: {} },
      ]),
    );
    const replayed = await readEvents(harness.app.db.pool, streamId, 0);
    expect(await live).toEqual(replayed);
    expect(returned).toEqual(replayed);
    expect(replayed.map((event) => event.seq)).toEqual([1, 2]);
    expect(replayed[1]!.data).toEqual({});
  });

  it("runs the caller's writes in the events' statement, or alone when there are no events; a failing one appends nothing", async () => {
    const streamId = `stream-${randomUUID()}`;
    const pool = harness.app.db.pool;
    const table = `alongside_${randomUUID().replaceAll("-", "")}`;
    await pool.query(`create table ${table} (id int primary key, note text)`);
    const note = (id: number, text: string) => (bind: (value: unknown) => string) => [
      `insert into ${table} values (${bind(id)}::int, ${bind(text)}::text)`,
    ];
    await inTransaction(pool, (client) =>
      appendEvents(client, streamFor(streamId), [{ type: "planning.cancelled", data: {} }], note(1, "with events")),
    );
    await inTransaction(pool, (client) => appendEvents(client, streamFor(streamId), [], note(2, "alone")));
    // A write that fails takes the events down with it: one statement, one outcome.
    await expect(
      inTransaction(pool, (client) =>
        appendEvents(client, streamFor(streamId), [{ type: "planning.cancelled", data: {} }], note(1, "duplicate")),
      ),
    ).rejects.toThrow(/duplicate key/);
    expect((await pool.query(`select id, note from ${table} order by id`)).rows).toEqual([
      { id: 1, note: "with events" },
      { id: 2, note: "alone" },
    ]);
    expect((await readEvents(pool, streamId, 0)).map((event) => event.seq)).toEqual([1]);
  });
});
