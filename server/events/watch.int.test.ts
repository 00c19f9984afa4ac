import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { inTransaction } from "../db";
import { builtinTools, createToolRegistry } from "../tools/registry";
import { defineTool } from "../tools/types";
import { EventBus } from "./bus";
import { appendEventsStatement, readEvents } from "./store";
import { streamEvents } from "./stream";
import type { StoredEvent } from "./types";

/**
 * Watched and unwatched runs (`EventBus.watch`): a run's engine pushes its routine step
 * transitions only while someone follows the run, and a follower still gets every event — whenever
 * it joins, whatever the engine was doing then, and if its mark lapsed.
 */

/** Steps of the "hold" tool wait until the test lets them go. */
const held: (() => void)[] = [];
const hold = defineTool({
  name: "hold",
  description: "Waits until the test releases it.",
  inputSchema: z.object({}),
  outputSchema: z.object({}),
  capability: "time.wait",
  capabilityLabel: "Wait",
  readOnly: true,
  destructive: false,
  idempotent: true,
  requiresApproval: false,
  defaultTimeoutSeconds: 300,
  execute: () => new Promise((resolve) => held.push(() => resolve({}))),
});

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ tools: createToolRegistry([...builtinTools, hold]) });
});
afterAll(async () => {
  for (const release of held.splice(0)) release();
  await harness?.close();
});

/** A run whose first step holds until `release`, followed by `echoes` echo steps in a chain. */
async function heldRun(echoes: number): Promise<{ runId: string; release: () => void }> {
  const steps = [
    { id: "s0", description: "Hold", tool: "hold", args: {} },
    ...Array.from({ length: echoes }, (_, i) => ({
      id: `s${i + 1}`,
      description: `Echo ${i + 1}`,
      tool: "echo",
      args: { value: i },
      dependsOn: [`s${i}`],
    })),
  ];
  const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "watch", steps }) });
  const before = held.length;
  const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
  await expect.poll(() => held.length, { timeout: 60_000 }).toBe(before + 1);
  return { runId, release: held[before]! };
}

async function lastSeq(streamId: string): Promise<number> {
  const result = await harness.app.db.pool.query<{ last_seq: number }>(
    "select last_seq from event_streams where id = $1",
    [streamId],
  );
  return result.rows[0]?.last_seq ?? 0;
}

/** Appends a log line to a run's stream without pushing it, as an engine transaction that found the run unwatched. */
async function appendQuietly(
  runId: string,
  message: string,
  client?: { query: (text: string, values: unknown[]) => Promise<unknown> },
) {
  const statement = appendEventsStatement(
    { streamId: runId, planId: "plan", runId, traceId: "trace" },
    [{ type: "step.log", stepId: "s0", data: { lines: [{ message, level: "info", at: new Date().toISOString() }] } }],
    { live: false },
  );
  if (client) await client.query(statement!.text, statement!.values);
  else await inTransaction(harness.app.db.pool, (c) => c.query(statement!.text, statement!.values));
}

/** Follows a stream through `bus` into `seen` until `abort`. */
function follow(bus: EventBus, streamId: string, abort: AbortController): { seen: StoredEvent[]; done: Promise<void> } {
  const seen: StoredEvent[] = [];
  const done = (async () => {
    for await (const event of streamEvents(bus, harness.app.db.pool, streamId, 0, abort.signal)) seen.push(event);
  })();
  return { seen, done };
}

const logMessages = (events: StoredEvent[]) =>
  events.flatMap((event) => (event.type === "step.log" ? event.data.lines.map((line) => line.message) : []));

describe("watched runs", () => {
  it("an unwatched run stores every transition but pushes only its end; a watched one pushes every event", async () => {
    const unwatched = await heldRun(3);
    const pushedUnwatched: StoredEvent[][] = [];
    const unsubscribe = harness.app.bus.subscribe(unwatched.runId, (events) => pushedUnwatched.push(events));
    unwatched.release();
    await harness.waitForRun(unwatched.runId);
    await expect.poll(() => pushedUnwatched.flat().map((e) => e.type), { timeout: 30_000 }).toContain("run.completed");
    unsubscribe();
    const stored = await readEvents(harness.app.db.pool, unwatched.runId, 0);
    expect(stored.filter((e) => e.type === "step.completed").map((e) => e.stepId)).toEqual(["s0", "s1", "s2", "s3"]);
    // A transaction's events are pushed together or not at all: only those with a run's start or
    // end in them were (the run's start may have been pushed before this subscribed).
    for (const batch of pushedUnwatched) expect(batch.some((e) => e.type.startsWith("run."))).toBe(true);
    expect(
      pushedUnwatched
        .flat()
        .filter((e) => e.type === "step.completed")
        .map((e) => e.stepId),
    ).toEqual(["s3"]);

    const watched = await heldRun(3);
    const pushedWatched: StoredEvent[] = [];
    const unwatch = await harness.app.bus.watch(watched.runId, (events) => pushedWatched.push(...events));
    const from = await lastSeq(watched.runId);
    watched.release();
    await harness.waitForRun(watched.runId);
    await expect.poll(() => pushedWatched.map((e) => e.type), { timeout: 30_000 }).toContain("run.completed");
    unwatch();
    // Everything committed after the watch began was pushed, routine transitions included.
    const after = (await readEvents(harness.app.db.pool, watched.runId, from)).map((e) => e.seq);
    expect(pushedWatched.map((e) => e.seq).filter((seq) => seq > from)).toEqual(after);
    expect(pushedWatched.filter((e) => e.type === "step.completed").map((e) => e.stepId)).toEqual([
      "s0",
      "s1",
      "s2",
      "s3",
    ]);
  });

  it("a watcher arriving while an engine transaction holds the run's lock reads what that transaction stored", async () => {
    const { runId, release } = await heldRun(0);
    // A bus of its own that never renews: only the watch's ordering can deliver the event.
    const bus = new EventBus(harness.app.db.url, harness.app.db.pool, { watchRenewMs: 3_600_000 });
    await bus.start();
    const abort = new AbortController();
    const engine = await harness.app.db.pool.connect();
    try {
      // What an engine transaction does: lock the run, find it unwatched, store without pushing.
      await engine.query("begin");
      const locked = await engine.query<{ watched: boolean }>(
        "select coalesce(watched_until > now(), false) as watched from runs where id = $1 for update",
        [runId],
      );
      expect(locked.rows[0]!.watched).toBe(false);
      await appendQuietly(runId, "stored under the lock", engine);
      const follower = follow(bus, runId, abort);
      // The watcher's mark waits for the lock: it has not read the stream before the commit.
      await expect
        .poll(
          async () =>
            (
              await harness.app.db.pool.query(
                `select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like 'update runs set watched_until%'`,
              )
            ).rowCount,
          { timeout: 30_000 },
        )
        .toBe(1);
      await engine.query("commit");
      await expect.poll(() => logMessages(follower.seen), { timeout: 30_000 }).toContain("stored under the lock");
      abort.abort();
      await follower.done;
    } finally {
      engine.release();
      abort.abort();
      await bus.close();
      release();
    }
  });

  it("a follower whose mark lapsed still gets what was stored unpushed, at its next renewal", async () => {
    const { runId, release } = await heldRun(0);
    const bus = new EventBus(harness.app.db.url, harness.app.db.pool, { watchRenewMs: 200 });
    await bus.start();
    const abort = new AbortController();
    try {
      const follower = follow(bus, runId, abort);
      await expect.poll(() => follower.seen.map((e) => e.type), { timeout: 30_000 }).toContain("run.started");
      // Stored without a push, as by an engine that found the mark lapsed (a frozen follower).
      await appendQuietly(runId, "stored while the mark had lapsed");
      await expect
        .poll(() => logMessages(follower.seen), { timeout: 30_000 })
        .toContain("stored while the mark had lapsed");
      abort.abort();
      await follower.done;
      // Every event once, in order.
      expect(follower.seen.map((e) => e.seq)).toEqual(follower.seen.map((_, i) => i + 1));
    } finally {
      abort.abort();
      await bus.close();
      release();
    }
  });
});
