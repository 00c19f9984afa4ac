import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { recordAudit } from "./audit-log";
import { sealAuditChain } from "./chain";
import { verifyAuditLog } from "./verify";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** The tests below break the record on purpose; the teardown's verify is told which effect. */
async function start(exempt?: { reason: string; subjects: RegExp }) {
  harness = await startHarness({ ...(exempt && { auditExemption: exempt }) });
  return harness;
}

const databaseUrl = (h: Harness) =>
  (h.app.db.pool as unknown as { options: { connectionString: string } }).options.connectionString;

async function resealChain(h: Harness): Promise<number> {
  const client = await h.app.db.pool.connect();
  try {
    return await sealAuditChain(client);
  } finally {
    client.release();
  }
}

/** Deletes one entry; the returned function puts it back exactly (the teardown verifies the chain). */
async function deleteEntry(h: Harness, seq: string) {
  const removed = await h.app.db.pool.query<{ entry: string; row_hash: string }>(
    "delete from audit_entries a where seq = $1 returning row_to_json(a)::text as entry, row_hash",
    [seq],
  );
  const { entry, row_hash: rowHash } = removed.rows[0]!;
  const restore = async () => {
    await h.app.db.pool.query(
      "insert into audit_entries select * from json_populate_record(null::audit_entries, $1::json)",
      [entry],
    );
  };
  return Object.assign(restore, { rowHash });
}

const verify = (h: Harness) => verifyAuditLog(h.app.db.pool, h.app.tools);

/** A plan with a read-only step and a gated write, approved and its gate approved, run to the end. */
async function approvedRun(h: Harness) {
  const plan = await h.caller.plans.createFromJson({
    planJson: JSON.stringify({
      goal: "Audited run",
      steps: [
        { id: "step_1", description: "Look", tool: "list_dir", args: { path: "." } },
        {
          id: "step_2",
          description: "Write",
          tool: "write_file",
          args: { path: "a.txt", content: "a" },
          dependsOn: ["step_1"],
        },
      ],
    }),
  });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
  await expect
    .poll(async () => (await h.caller.runs.get({ runId })).steps.find((s) => s.stepId === "step_2")?.status, {
      timeout: 30_000,
    })
    .toBe("awaiting_approval");
  await h.caller.runs.decide({ runId, stepId: "step_2", approve: true });
  expect((await h.waitForRun(runId)).status).toBe("completed");
  return { runId, planId: plan.id };
}

async function seqOf(h: Harness, action: string, runId: string): Promise<string> {
  const row = await h.app.db.pool.query<{ seq: string }>(
    "select seq::text from audit_entries where action = $1 and run_id = $2",
    [action, runId],
  );
  return row.rows[0]!.seq;
}

describe("audit verify", () => {
  it("an approved run verifies clean: one chain, the write authorised by the person's approval of its definition", async () => {
    const h = await start();
    const { runId } = await approvedRun(h);
    const report = await verify(h);
    expect(report.breaks).toEqual([]);
    expect(report.unauthorised).toEqual([]);
    expect(report.ok).toBe(true);
    const write = report.authorised.find((effect) => effect.runId === runId && effect.stepId === "step_2");
    expect(write?.decisions).toEqual([
      expect.objectContaining({
        kind: "step_approval",
        actor: "tester",
        actorKind: "person",
        definitionHash: expect.stringMatching(/^[0-9a-f]{64}$/),
        seq: await seqOf(h, "step.approved", runId),
      }),
    ]);
    // The read-only step needed no decision, and is recognised as such.
    expect(report.systemDecided["read-only use of list_dir"]).toBe(1);
    expect(report.head.seq).toBe(String(report.entries));
  });

  it("a hand-edited entry is found by its seq, expected and found hash", async () => {
    const h = await start();
    const { runId } = await approvedRun(h);
    const seq = await seqOf(h, "step.approved", runId);
    await h.app.db.pool.query(`update audit_entries set actor = 'mallory' where seq = $1`, [seq]);
    const report = await verify(h);
    expect(report.ok).toBe(false);
    expect(report.breaks).toEqual([
      { seq, kind: "entry_changed", expected: expect.stringMatching(/^[0-9a-f]{64}$/), found: expect.any(String) },
    ]);
    // Put back, the chain verifies again: the hash is over the content, nothing else.
    await h.app.db.pool.query(`update audit_entries set actor = 'tester' where seq = $1`, [seq]);
    expect((await verify(h)).breaks).toEqual([]);
  });

  it("a deleted entry is found: its seq is missing and the next entry's link is broken", async () => {
    const h = await start();
    const { runId } = await approvedRun(h);
    const seq = await seqOf(h, "plan.approved", runId);
    const restore = await deleteEntry(h, seq);
    const report = await verify(h);
    const next = String(BigInt(seq) + 1n);
    expect(report.breaks).toEqual([
      { seq, kind: "missing", expected: `seq ${seq}`, found: `next entry is seq ${next}` },
      // The next entry still names the deleted one's hash; the one before it has another.
      { seq: next, kind: "link_broken", expected: expect.stringMatching(/^[0-9a-f]{64}$/), found: restore.rowHash },
    ]);
    expect(report.ok).toBe(false);
    await restore();
    expect((await verify(h)).ok).toBe(true);
  });

  it("the newest entry deleted is found at the head", async () => {
    const h = await start();
    await approvedRun(h);
    const newest = (await h.app.db.pool.query<{ seq: string }>("select max(seq)::text as seq from audit_entries"))
      .rows[0]!.seq;
    const restore = await deleteEntry(h, newest);
    const report = await verify(h);
    expect(report.breaks).toEqual([expect.objectContaining({ seq: newest, kind: "head_mismatch" })]);
    await restore();
    expect((await verify(h)).ok).toBe(true);
  });

  it("a step whose approval row is deleted is an effect without a decision", async () => {
    const h = await start({
      reason: "the test deletes the approval of a write that ran, which verify must report",
      subjects: /step_2 \(write_file\)$/,
    });
    const { runId } = await approvedRun(h);
    await h.app.db.pool.query("delete from approvals where run_id = $1 and step_id = 'step_2'", [runId]);
    const report = await verify(h);
    expect(report.breaks).toEqual([]);
    expect(report.unauthorised).toEqual([
      expect.objectContaining({
        kind: "step",
        runId,
        stepId: "step_2",
        problem: "gated, and no approval of the definition that ran",
      }),
    ]);
    expect(report.ok).toBe(false);
  });

  it("an approval by someone who was a viewer at the time does not authorise the effect", async () => {
    const h = await start({ reason: "the approval is rewritten to a viewer's", subjects: /step_2 \(write_file\)$/ });
    await h.caller.people.add({ kind: "person", name: "vic", role: "viewer" });
    const { runId } = await approvedRun(h);
    // As if vic had approved: the row and its entry, re-sealed so the chain itself holds.
    await h.app.db.pool.query("update approvals set actor = 'vic' where run_id = $1", [runId]);
    await h.app.db.pool.query("update audit_entries set actor = 'vic' where action = 'step.approved' and run_id = $1", [
      runId,
    ]);
    await h.app.db.pool.query("update audit_entries set row_hash = null, prev_hash = null");
    await h.app.db.pool.query("update audit_chain_head set row_hash = null");
    await resealChain(h);
    const report = await verify(h);
    expect(report.breaks).toEqual([]);
    expect(report.unauthorised).toEqual([
      expect.objectContaining({ stepId: "step_2", problem: "vic (person, viewer) may not approve" }),
    ]);
  });

  it("20 concurrent appends keep one unbroken chain in seq order", async () => {
    const h = await start();
    const before = (await verify(h)).entries;
    const clients = await Promise.all(
      Array.from({ length: 20 }, async () => {
        const client = new pg.Client({ connectionString: databaseUrl(h) });
        await client.connect();
        return client;
      }),
    );
    try {
      // Each transaction starts, waits a little (so they overlap), appends, waits, commits.
      await Promise.all(
        clients.map(async (client, index) => {
          await client.query("begin");
          await client.query("select pg_sleep($1)", [(index % 5) / 100]);
          await recordAudit(client, {
            actor: `writer-${index}`,
            action: "signal.raised",
            planId: "concurrency",
            detail: { index },
          });
          await client.query("select pg_sleep($1)", [((20 - index) % 7) / 100]);
          await client.query("commit");
        }),
      );
    } finally {
      await Promise.all(clients.map((client) => client.end()));
    }
    const report = await verify(h);
    expect(report.breaks).toEqual([]);
    expect(report.entries).toBe(before + 20);
    const seqs = await h.app.db.pool.query<{ seq: string }>(
      "select seq::text from audit_entries order by audit_entries.seq",
    );
    expect(seqs.rows.map((row) => Number(row.seq))).toEqual(Array.from({ length: before + 20 }, (_, i) => i + 1));
  });

  it("entries from before the chain are sealed once, and verify clean after", async () => {
    const h = await start();
    await approvedRun(h);
    // What the migration leaves on an old database: numbered entries, no hashes, an unsealed head.
    await h.app.db.pool.query("update audit_entries set row_hash = null, prev_hash = null");
    await h.app.db.pool.query("update audit_chain_head set row_hash = null");
    expect((await verify(h)).breaks).toContainEqual(expect.objectContaining({ kind: "unsealed" }));
    expect(await resealChain(h)).toBeGreaterThan(0);
    expect(await resealChain(h)).toBe(0);
    const report = await verify(h);
    expect(report.breaks).toEqual([]);
    expect(report.ok).toBe(true);
  });
});
