import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { freeJobsNotInHand, JobsInHand } from "./queue-locks";

let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(async () => {
  await harness?.close();
});

async function lockedJob(task: string, runner: string, lockedSecondsAgo: number): Promise<string> {
  const pool = harness.app.db.pool;
  const added = await pool.query<{ id: string }>("select id from graphile_worker.add_job($1, '{}'::json)", [task]);
  const id = added.rows[0]!.id;
  await pool.query(
    `update graphile_worker._private_jobs set locked_by = $2, locked_at = now() - make_interval(secs => $3)
      where id = $1`,
    [id, runner, lockedSecondsAgo],
  );
  return id;
}

async function lockOf(id: string): Promise<string | null> {
  const rows = await harness.app.db.pool.query<{ locked_by: string | null }>(
    "select locked_by from graphile_worker._private_jobs where id = $1",
    [id],
  );
  return rows.rows[0]!.locked_by;
}

describe("jobs a worker's own runners locked but it never ran (freeJobsNotInHand)", () => {
  it("frees only those: not a job in hand, not a fresh lock, not another worker's", async () => {
    const inHand = new JobsInHand();
    const running = await lockedJob("lock_test_running", "runner-mine", 60);
    const forgotten = await lockedJob("lock_test_forgotten", "runner-mine", 60);
    const fresh = await lockedJob("lock_test_fresh", "runner-mine", 0);
    const others = await lockedJob("lock_test_others", "runner-other", 60);
    let finish!: () => void;
    const task = inHand.track(() => new Promise<void>((resolve) => (finish = resolve)));
    const taskDone = task(undefined, { job: { id: running } });

    expect(await freeJobsNotInHand(harness.app.db.pool, ["runner-mine"], inHand, 30_000)).toBe(1);
    expect(await lockOf(forgotten)).toBe(null);
    expect(await lockOf(running)).toBe("runner-mine");
    expect(await lockOf(fresh)).toBe("runner-mine");
    expect(await lockOf(others)).toBe("runner-other");

    // Just finished, not yet marked complete by the queue: still in hand.
    finish();
    await taskDone;
    expect(inHand.ids()).toEqual([running]);
    expect(await freeJobsNotInHand(harness.app.db.pool, ["runner-mine"], inHand, 30_000)).toBe(0);
    expect(await lockOf(running)).toBe("runner-mine");
  });
});
