import { spawn, type ChildProcess } from "node:child_process";
import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { goodPlan } from "../../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { readEvents } from "../events/store";
import { readPlannerConfig } from "./config";
import { createPlannerDeps, installPlanner } from "./deps";
import { recoverPlanningSessions } from "./session-jobs";
import { programCommand } from "../../tests/program-command";

/**
 * Durable planning sessions across real processes: `stepwise worker` processes run the loops
 * against this test's database, and are killed with SIGKILL at awkward moments. This process
 * (no worker of its own) starts sessions and answers questions, as the web server would.
 */
const projectRoot = fileURLToPath(new URL("../../", import.meta.url));

let harness: Harness;
let llm: ScriptedLlm;
const children: { process: ChildProcess; exited: Promise<unknown> }[] = [];

function llmEnv(): Record<string, string> {
  return {
    STEPWISE_LLM_BASE_URL: llm.baseUrl,
    STEPWISE_LLM_MODELS: "scripted-planner",
    STEPWISE_LLM_NAME: "Scripted",
    STEPWISE_PLANNER_RETRIES: "0",
    STEPWISE_PLANNER_TIMEOUT_MS: "60000",
  };
}

function startWorker(env: Record<string, string> = {}) {
  let output = "";
  const { DATABASE_URL: _unset, ...inherited } = process.env;
  const [command, ...args] = programCommand("server/cli/main.ts", ["worker"]);
  const child = spawn(command!, args, {
    cwd: projectRoot,
    env: {
      ...inherited,
      DATABASE_URL: harness.app.db.url,
      STEPWISE_WORKSPACE: harness.workspace,
      STEPWISE_HEARTBEAT_MS: "200",
      ...llmEnv(),
      ...env,
    },
    stdio: ["ignore", "pipe", "pipe"],
  });
  child.stdout!.on("data", (chunk) => (output += chunk));
  child.stderr!.on("data", (chunk) => (output += chunk));
  const exited = new Promise((resolve) => child.on("exit", resolve));
  children.push({ process: child, exited });
  return {
    output: () => output,
    async kill() {
      child.kill("SIGKILL");
      await exited;
    },
  };
}

beforeAll(async () => {
  harness = await startHarness({ worker: false });
  llm = await startScriptedLlm();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\nA demo project.\n");
});
afterEach(async () => {
  for (const child of children.splice(0)) {
    child.process.kill("SIGKILL");
    await child.exited;
  }
});
afterAll(async () => {
  await llm?.close();
  await harness?.close();
});
beforeEach(() => {
  llm.reset();
  installPlanner(harness.app, createPlannerDeps(harness.app, readPlannerConfig(llmEnv())));
});

const session = (sessionId: string) => harness.caller.planner.session({ sessionId });
const eventTypes = async (sessionId: string) =>
  (await readEvents(harness.app.db.pool, sessionId, 0)).map((event) => event.type);

async function auditActions(sessionId: string) {
  const rows = await harness.app.db.pool.query<{ action: string; actor: string; detail: Record<string, unknown> }>(
    "select action, actor, detail from audit_entries where detail->>'sessionId' = $1 order by id",
    [sessionId],
  );
  return rows.rows;
}

describe("durable planning sessions", () => {
  it("resumes a session whose worker was killed mid-gathering, without re-running a recorded tool call", async () => {
    llm.script(
      { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
      // The second turn's model call is in flight when the worker dies; it is simply made again.
      { hang: true },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    const first = startWorker();
    await expect.poll(() => llm.requests.length, { timeout: 45_000 }).toBe(2);
    await first.kill();
    const stranded = await session(sessionId);
    expect(stranded).toMatchObject({ status: "running", phase: "gathering" });

    const second = startWorker();
    await expect.poll(async () => (await session(sessionId)).status, { timeout: 45_000 }).toBe("completed");
    expect(second.output()).not.toContain("crashed");
    // The tool ran once: its recorded result went back to the model in the redone turn.
    const types = await eventTypes(sessionId);
    expect(types.filter((type) => type === "planning.tool_call")).toHaveLength(1);
    expect(types).toContain("planning.resumed");
    expect(llm.requests).toHaveLength(3);
    // The redone call carries exactly the transcript of the lost one: no turn twice.
    expect(llm.requests[2]!.messages).toEqual(llm.requests[1]!.messages);
    const assistantTurns = llm.requests[2]!.messages.filter((message) => message.role === "assistant");
    expect(assistantTurns).toHaveLength(1);
    expect(JSON.stringify(llm.requests[2]!.messages)).toContain("A demo project.");
    const plan = await harness.caller.plans.get({ planId: (await session(sessionId)).planId! });
    expect(plan.plan.summary).toBe(goodPlan.summary);
  }, 120_000);

  it("uses an answer given while no worker runs once a worker starts", async () => {
    llm.script(
      { toolCalls: [{ name: "ask_user", arguments: { question: "Which file matters most?" } }] },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    const first = startWorker();
    await expect.poll(async () => (await session(sessionId)).status, { timeout: 45_000 }).toBe("awaiting_answer");
    await first.kill();

    const waiting = await session(sessionId);
    await harness.caller.planner.answer({ sessionId, questionId: waiting.questions[0]!.id, answer: "The README" });
    // Stored and queued although nothing runs: the session is back to running, its job waiting.
    expect((await session(sessionId)).status).toBe("running");
    const jobs = await harness.app.db.pool.query("select 1 from graphile_worker.jobs where key = $1", [
      `planning:${sessionId}`,
    ]);
    expect(jobs.rowCount).toBe(1);

    startWorker();
    await expect.poll(async () => (await session(sessionId)).status, { timeout: 45_000 }).toBe("completed");
    expect(llm.requests).toHaveLength(2);
    expect(JSON.stringify(llm.requests[1]!.messages)).toContain("The README");
    expect(await auditActions(sessionId)).toEqual([
      expect.objectContaining({
        action: "planning.answered",
        actor: "tester",
        detail: expect.objectContaining({ sessionId, answer: "The README" }),
      }),
    ]);
  }, 120_000);

  it("cancels a session whose question nobody answers within the configured time", async () => {
    llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Anyone there?" } }] });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    startWorker({ STEPWISE_PLANNER_ANSWER_TIMEOUT_MS: "1500" });
    await expect.poll(async () => (await session(sessionId)).status, { timeout: 45_000 }).toBe("awaiting_answer");
    await expect.poll(async () => (await session(sessionId)).status, { timeout: 30_000 }).toBe("cancelled");
    const cancelled = await session(sessionId);
    expect(cancelled.failure).toMatchObject({ kind: "answer_timeout" });
    expect(await eventTypes(sessionId)).toContain("planning.timed_out");
    expect(await auditActions(sessionId)).toEqual([
      expect.objectContaining({
        action: "planning.timed_out",
        detail: expect.objectContaining({ sessionId, questionId: cancelled.questions[0]!.id }),
      }),
    ]);
    // Too late to answer now.
    await expect(
      harness.caller.planner.answer({ sessionId, questionId: cancelled.questions[0]!.id, answer: "Me" }),
    ).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
  }, 120_000);

  it("cancels a session parked by a worker that is gone, and audits it", async () => {
    llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Which file?" } }] });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    const first = startWorker();
    await expect.poll(async () => (await session(sessionId)).status, { timeout: 45_000 }).toBe("awaiting_answer");
    await first.kill();
    await harness.caller.planner.cancel({ sessionId });
    expect((await session(sessionId)).status).toBe("cancelled");
    expect(await auditActions(sessionId)).toEqual([
      expect.objectContaining({ action: "planning.cancelled", actor: "tester" }),
    ]);
    expect(llm.requests).toHaveLength(1);
  }, 120_000);

  it("recovery queues a session nobody holds, never a second job for one whose job a live worker holds", async () => {
    const pool = harness.app.db.pool;
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    const jobs = () =>
      pool
        .query<{ key: string | null }>(
          "select key from graphile_worker._private_jobs where payload->>'sessionId' = $1",
          [sessionId],
        )
        .then((result) => result.rows.map((row) => row.key));
    // A live worker locked the job a minute ago and has not claimed the session yet (a busy
    // machine): five of its heartbeats have long passed, but it is alive.
    const live = randomUUID();
    await pool.query(
      "insert into workers (id, hostname, pid, heartbeat_ms, queue_worker_ids) values ($1, 'busy', 1, 200, array['busy-runner'])",
      [live],
    );
    await pool.query(
      `update graphile_worker._private_jobs set locked_by = 'busy-runner', locked_at = now() - interval '1 minute'
        where payload->>'sessionId' = $1`,
      [sessionId],
    );
    const deps = createPlannerDeps(harness.app, readPlannerConfig(llmEnv()));
    expect(await recoverPlanningSessions(deps, randomUUID())).toBe(0);
    expect(await jobs()).toEqual([`planning:${sessionId}`]);

    // Its job gone (say, failed for good) and nobody holding the session: queued again.
    await pool.query("delete from graphile_worker._private_jobs where payload->>'sessionId' = $1", [sessionId]);
    expect(await recoverPlanningSessions(deps, randomUUID())).toBe(1);
    expect(await jobs()).toEqual([`planning:${sessionId}`]);
    await harness.caller.planner.cancel({ sessionId });
    await pool.query("delete from workers where id = $1", [live]);
  });

  it("a cancel given here stops the loop running in a worker process at once", async () => {
    // The model call would hang for the 60 s call timeout; the cancel must end it long before.
    llm.script({ hang: true });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    startWorker();
    await expect.poll(() => llm.requests.length, { timeout: 45_000 }).toBe(1);
    // The session's jobs by payload, not key: a second job queued while the loop runs takes the
    // key and is skipped by this process, leaving the loop's own job without it.
    const job = () =>
      harness.app.db.pool
        .query(
          "select 1 from graphile_worker._private_jobs where payload->>'sessionId' = $1 and locked_at is not null",
          [sessionId],
        )
        .then((result) => result.rowCount);
    expect(await job()).toBeGreaterThan(0); // held by the worker while its loop runs
    await harness.caller.planner.cancel({ sessionId });
    await expect.poll(job, { timeout: 15_000 }).toBe(0);
    expect((await session(sessionId)).status).toBe("cancelled");
    expect(await eventTypes(sessionId)).not.toContain("planning.failed");
  }, 120_000);
});
