import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { AppError } from "../errors";
import { PLANNING_SESSION_STATUSES, type PlanningSessionStatus } from "../vocabulary";
import * as store from "./session-store";
import { TRANSITIONS, type TransitionName } from "./session-store";

/**
 * The transition table against real PostgreSQL: from every status, each transition either moves
 * the session (when the table allows that status) or is refused with invalid_state and leaves the
 * row exactly as it was.
 */
let harness: Harness;
/**
 * A live worker that holds every built-in session made here, so the harness's own worker neither
 * recovers nor runs them while the table is walked.
 */
const HOLDER = randomUUID();
beforeAll(async () => {
  harness = await startHarness();
  await harness.app.db.pool.query(
    "insert into workers (id, hostname, pid, heartbeat_ms) values ($1, 'session-store test', 0, 3600000)",
    [HOLDER],
  );
});
afterAll(() => harness.close());

const pool = () => harness.app.db.pool;

async function sessionIn(status: PlanningSessionStatus, kind: "create" | "external"): Promise<string> {
  let id: string;
  if (kind === "external") {
    id = randomUUID();
    await store.createExternalSession(pool(), {
      id,
      reason: "table test",
      model: "agent a",
      workspaceRoot: harness.workspace,
      traceId: randomUUID(),
      actor: "a",
    });
  } else {
    // Made and held in one transaction: never seen unowned.
    const client = await pool().connect();
    try {
      await client.query("begin");
      ({ id } = await store.createSession(client, {
        kind: "create",
        mode: "deep",
        goal: "table test",
        model: "compatible:m",
        workspaceId: null,
        workspaceRoot: harness.workspace,
        useJudge: false,
        maxRefinements: 1,
        traceId: randomUUID(),
        actor: "tester",
      }));
      await client.query("update planning_sessions set worker_id = $2 where id = $1", [id, HOLDER]);
      await client.query("commit");
    } finally {
      client.release();
    }
  }
  // Set up the state under test directly (tests only; the store is the product's one writer).
  await pool().query("update planning_sessions set status = $2, plan_id = $3 where id = $1", [
    id,
    status,
    `plan-${id}`,
  ]);
  return id;
}

async function row(id: string): Promise<Record<string, unknown>> {
  return (await pool().query("select * from planning_sessions where id = $1", [id])).rows[0] as Record<string, unknown>;
}

const failure = { status: "error", error_type: "internal", message: "test", retryable: true };

/** How each transition is called, on a session of which kind, after what preparation. */
const CASES: Record<
  TransitionName,
  { kind: "create" | "external"; prepare?: (id: string) => Promise<unknown>; call: (id: string) => Promise<unknown> }
> = {
  askQuestion: { kind: "external", call: (id) => store.askQuestion(pool(), id) },
  recordAnswer: { kind: "create", call: (id) => store.recordAnswer(pool(), id) },
  complete: { kind: "create", call: (id) => store.complete(pool(), id, { planId: "p", resultVersion: 1 }) },
  submitPlan: { kind: "external", call: (id) => store.submitPlan(pool(), id, { planId: "p", resultVersion: 2 }) },
  markInvalid: { kind: "create", call: (id) => store.markInvalid(pool(), id, failure) },
  fail: { kind: "create", call: (id) => store.fail(pool(), id, failure) },
  cancel: { kind: "create", call: (id) => store.cancel(pool(), id) },
  timeOutQuestion: {
    kind: "create",
    prepare: (id) =>
      pool().query("insert into planning_questions (id, session_id, question) values ($1, $2, 'Which?')", [id, id]),
    call: (id) => store.timeOutQuestion(pool(), id, id, failure),
  },
  timeOutIdle: { kind: "external", call: (id) => store.timeOutIdle(pool(), id, 0, failure) },
  endForRejectedPlan: {
    kind: "external",
    call: async (id) => {
      const ended = await store.endForRejectedPlan(pool(), `plan-${id}`);
      // Set-wise: a session that may not end is simply not among those ended.
      if (ended.length === 0) throw new AppError("invalid_state", "none ended", { transition: "endForRejectedPlan" });
      return ended;
    },
  },
  recordReviewTimeout: { kind: "external", call: (id) => store.recordReviewTimeout(pool(), id, failure) },
};

describe("planning session transitions", () => {
  for (const [name, rule] of Object.entries(TRANSITIONS) as [TransitionName, (typeof TRANSITIONS)[TransitionName]][]) {
    it(`${name}: moves from ${rule.from.join(", ")} to ${rule.to}; refused from anything else, changing nothing`, async () => {
      const spec = CASES[name];
      for (const status of PLANNING_SESSION_STATUSES) {
        const id = await sessionIn(status, spec.kind);
        await spec.prepare?.(id);
        const before = await row(id);
        const allowed = (rule.from as readonly string[]).includes(status);
        if (allowed) {
          await spec.call(id);
          expect((await row(id)).status, `${name} from ${status}`).toBe(rule.to);
        } else {
          const error = await spec.call(id).then(
            () => undefined,
            (caught: unknown) => caught,
          );
          expect(error, `${name} from ${status} must be refused`).toBeInstanceOf(AppError);
          expect((error as AppError).code).toBe("invalid_state");
          expect(store.lostRace(error), `${name} from ${status}`).toBe(true);
          expect(await row(id), `${name} from ${status} changed the row`).toEqual(before);
        }
      }
    });
  }

  it("a refusal names the session's status and the transition; an unknown session is not_found", async () => {
    const id = await sessionIn("completed", "create");
    await expect(store.cancel(pool(), id)).rejects.toMatchObject({
      code: "invalid_state",
      message: expect.stringContaining("completed") as string,
      details: { sessionId: id, transition: "cancel", status: "completed", allowed: ["running", "awaiting_answer"] },
    });
    await expect(store.cancel(pool(), randomUUID())).rejects.toMatchObject({ code: "not_found" });
  });

  it("recordAnswer waits while another question is open; timeOutQuestion spares an answered question", async () => {
    const id = await sessionIn("awaiting_answer", "create");
    const question = randomUUID();
    await pool().query("insert into planning_questions (id, session_id, question) values ($1, $2, 'Which?')", [
      question,
      id,
    ]);
    expect(await store.recordAnswer(pool(), id)).toBe("waiting");
    expect((await row(id)).status).toBe("awaiting_answer");
    await pool().query("update planning_questions set answer = 'This' where id = $1", [question]);
    await expect(store.timeOutQuestion(pool(), id, question, failure)).rejects.toMatchObject({
      code: "invalid_state",
      message: "That question was answered",
    });
    expect(await store.recordAnswer(pool(), id)).toBe("resumed");
    expect((await row(id)).status).toBe("running");
  });

  it("the loop's writes hold only for the worker holding a running session", async () => {
    const id = await sessionIn("running", "create");
    const holder = HOLDER;
    // Held by a live worker: another is refused; the holder takes back its own.
    expect(await store.claimLoop(pool(), id, randomUUID())).toBe(false);
    expect(await store.claimLoop(pool(), id, holder)).toBe(true);
    expect(await store.setPhase(pool(), id, randomUUID(), "drafting")).toBe(false);
    expect(await store.saveLoopState(pool(), id, randomUUID(), { turns: 1 })).toBe(false);
    expect(await store.setPhase(pool(), id, holder, "drafting")).toBe(true);
    await expect(store.askQuestion(pool(), id, { workerId: randomUUID() })).rejects.toMatchObject({
      code: "invalid_state",
    });
    await store.askQuestion(pool(), id, { workerId: holder });
    expect(await row(id)).toMatchObject({ status: "awaiting_answer", worker_id: null, phase: "drafting" });
    expect(await store.setPhase(pool(), id, holder, "submitted")).toBe(false);
    expect(await store.claimLoop(pool(), id, holder)).toBe(false);
  });
});
