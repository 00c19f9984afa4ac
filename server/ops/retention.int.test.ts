import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { verifyAuditLog } from "../audit/verify";
import { retentionWork, runRetentionPass, type RetentionBatch } from "./retention";

let harness: Harness;
let planId: string;
let template: string;

beforeAll(async () => {
  // No worker: the seeded runs stay exactly as written, and no maintenance tick runs a pass of its own.
  harness = await startHarness({ worker: false });
  const plan = await harness.caller.plans.createFromJson({
    planJson: JSON.stringify({
      goal: "Retention",
      steps: [{ id: "step_1", description: "echo", tool: "echo", args: { value: 1 } }],
    }),
  });
  planId = plan.id;
  // Approving writes the audit entries the chain check replays afterwards.
  template = (await harness.caller.plans.approve({ planId: plan.id, version: plan.version })).runId;
});
afterAll(async () => {
  await harness?.close();
});

const query = <T extends object>(text: string, values: unknown[] = []) =>
  harness.app.db.pool.query<T & import("pg").QueryResultRow>(text, values).then((result) => result.rows);

/**
 * A run of the approved plan written straight into the tables, with `events` events (every other
 * one a step log) and one `task.verified` record, created and finished the given days ago.
 */
async function seedRun(options: { status: string; ageDays: number; finished: boolean; events: number }) {
  const id = randomUUID();
  await query(
    `insert into runs (id, plan_id, plan_version, status, trace_id, approved_by, workspace_root, workspace_id,
                       open_steps, created_at, started_at, finished_at)
     select $1, plan_id, plan_version, $2, trace_id, approved_by, workspace_root, workspace_id, $3,
            now() - make_interval(days => $4), now() - make_interval(days => $4),
            case when $5 then now() - make_interval(days => $4) + interval '1 minute' end
       from runs where id = $6`,
    [id, options.status, options.finished ? 0 : 1, options.ageDays, options.finished, template],
  );
  await query(
    `insert into run_steps (run_id, step_id, position, tool, status, depends_on, attempt, result, finished_at)
     values ($1, 'step_1', 0, 'echo', $2, '{}', 1, $3, case when $4 then now() end)`,
    [
      id,
      options.finished ? "completed" : "pending",
      // A step result as the engine records it (vocabulary.ts, stepResultSchema).
      options.finished
        ? JSON.stringify({ ok: true, value: { value: 1 }, duration: 5, timestamp: "2026-01-01T00:00:00.000Z" })
        : null,
      options.finished,
    ],
  );
  await query(
    `insert into events (stream_id, seq, type, plan_id, run_id, step_id, trace_id, data, created_at)
     select $1, g, case when g % 2 = 0 then 'step.log' else 'step.progress' end, $2, $1::uuid, 'step_1', 't',
            case when g % 2 = 0
              then jsonb_build_object('lines', jsonb_build_array(jsonb_build_object('message', 'line ' || g, 'level', 'info', 'at', now())))
              else jsonb_build_object('progress', g % 100) end,
            now() - make_interval(days => $3)
       from generate_series(1, $4) g
     union all
     select $1, $4 + 1, 'task.verified', $2, $1::uuid, 'step_1', 't', '{"passed": true, "results": []}', now()`,
    [id, planId, options.ageDays, options.events],
  );
  await query("insert into event_streams (id, last_seq) values ($1, $2)", [id, options.events + 1]);
  return id;
}

const eventTypes = (runId: string) =>
  query<{ type: string }>("select type from events where stream_id = $1 order by seq", [runId]).then((rows) =>
    rows.map((row) => row.type),
  );

describe("retention", () => {
  it("removes only old finished runs' events and step logs, in batches, keeping summaries and the audit log", async () => {
    const oldCompleted = await seedRun({ status: "completed", ageDays: 200, finished: true, events: 35 });
    const oldFailed = await seedRun({ status: "failed", ageDays: 120, finished: true, events: 20 });
    const recent = await seedRun({ status: "completed", ageDays: 10, finished: true, events: 20 });
    const oldRunning = await seedRun({ status: "running", ageDays: 300, finished: false, events: 20 });
    const auditBefore = await query<{ n: number; head: string }>(
      "select count(*)::int as n, max(row_hash) filter (where seq = (select max(seq) from audit_entries)) as head from audit_entries",
    );
    expect(auditBefore[0]!.n).toBeGreaterThan(0);

    const batches: RetentionBatch[] = [];
    const report = await runRetentionPass(harness.app.db.pool, {
      olderThanDays: 90,
      batchSize: 10,
      onBatch: (batch) => batches.push(batch),
    });

    // 35 rows in batches of 10: 10, 10, 10 and 5 (the last, short batch marks the run) — 4 transactions.
    expect(batches.filter((b) => b.runId === oldCompleted).map((b) => b.deleted)).toEqual([10, 10, 10, 5]);
    // 20 rows: two full batches, then an empty one that finds nothing left and marks the run.
    expect(batches.filter((b) => b.runId === oldFailed).map((b) => b.deleted)).toEqual([10, 10, 0]);
    expect(new Set(batches.map((b) => b.runId))).toEqual(new Set([oldCompleted, oldFailed]));
    expect(report).toMatchObject({ runs: 2, events: 55, transactions: 7, more: false });

    // Task verifications are records (the run page and audit read them); everything else is gone.
    expect(await eventTypes(oldCompleted)).toEqual(["task.verified"]);
    expect(await eventTypes(oldFailed)).toEqual(["task.verified"]);
    expect(await eventTypes(recent)).toHaveLength(21);
    expect(await eventTypes(oldRunning)).toHaveLength(21);

    const marked = await query<{ id: string }>("select id from runs where events_removed_at is not null order by id");
    expect(marked.map((row) => row.id)).toEqual([oldCompleted, oldFailed].sort());

    // The audit log is untouched and still verifies.
    const auditAfter = await query<{ n: number; head: string }>(
      "select count(*)::int as n, max(row_hash) filter (where seq = (select max(seq) from audit_entries)) as head from audit_entries",
    );
    expect(auditAfter).toEqual(auditBefore);
    const verification = await verifyAuditLog(harness.app.db.pool, harness.app.tools);
    expect(verification.ok).toBe(true);
    expect(verification.breaks).toEqual([]);

    // The run list and the run page still answer, and the page data says what happened.
    const list = await harness.caller.runs.list({ limit: 50 });
    const summaries = new Map(list.runs.map((run) => [run.id, run]));
    expect(summaries.get(oldCompleted)).toMatchObject({
      status: "completed",
      totalSteps: 1,
      stepCounts: { completed: 1 },
    });
    expect(summaries.get(oldFailed)).toMatchObject({ status: "failed", totalSteps: 1 });

    const page = await harness.caller.runs.get({ runId: oldCompleted });
    expect(page.eventsRemovedAt).toEqual(expect.any(String));
    expect(page.lastSeq).toBe(36);
    expect(page.steps[0]).toMatchObject({
      stepId: "step_1",
      status: "completed",
      result: { ok: true, value: { value: 1 } },
    });
    expect((await harness.caller.runs.get({ runId: recent })).eventsRemovedAt).toBeUndefined();
    expect((await harness.caller.runs.get({ runId: oldRunning })).eventsRemovedAt).toBeUndefined();

    // A second pass finds nothing to do.
    const again: RetentionBatch[] = [];
    expect(
      await runRetentionPass(harness.app.db.pool, { olderThanDays: 90, batchSize: 10, onBatch: (b) => again.push(b) }),
    ).toMatchObject({ runs: 0, events: 0, transactions: 0 });
    expect(again).toEqual([]);
  });

  it("stops at its budget and resumes where it stopped", async () => {
    const run = await seedRun({ status: "cancelled", ageDays: 400, finished: true, events: 30 });
    const first = await runRetentionPass(harness.app.db.pool, { olderThanDays: 90, batchSize: 10, budgetMs: 0 });
    expect(first).toMatchObject({ transactions: 0, more: true });
    expect(await eventTypes(run)).toHaveLength(31);
    const second = await runRetentionPass(harness.app.db.pool, { olderThanDays: 90, batchSize: 10 });
    expect(second).toMatchObject({ runs: 1, events: 30, more: false });
    expect(await eventTypes(run)).toEqual(["task.verified"]);
  });

  it("runs as a worker's maintenance at most once per interval while no backlog remains", async () => {
    const work = retentionWork(harness.app.db.pool, { olderThanDays: 90, intervalMs: 60 * 60_000, batchSize: 10 });
    const first = await seedRun({ status: "completed", ageDays: 150, finished: true, events: 12 });
    await work.maintain();
    expect(await eventTypes(first)).toEqual(["task.verified"]);
    // Within the interval the next ticks leave a newly due run alone; the next pass takes it.
    const second = await seedRun({ status: "completed", ageDays: 150, finished: true, events: 12 });
    await work.maintain();
    expect(await eventTypes(second)).toHaveLength(13);
  });
});
