import { spawn, type ChildProcess } from "node:child_process";
import fs from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { readEvents } from "../events/store";
import { agentStart, agentUpdate } from "../operations/agent";
import type { Identity } from "../identity";
import { invokeOperation } from "../operations/operation";
import { taskBriefSchema } from "./contract";

/**
 * Several agents, one plan: three scripted agents, each its own process driving the real
 * `stepwise` CLI (tests/scripted-agent.mjs), against a real server, database and worker. Every
 * wait is for a condition; the generous timeouts are only backstops for a busy machine.
 */
const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
const bin = path.join(projectRoot, "bin/stepwise.mjs");
const agentScript = path.join(projectRoot, "tests/scripted-agent.mjs");
const AGENT_TOKEN = "parallel-agents-token";
const PLANNER: Identity = { kind: "agent", name: "planner" };

let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
const children: ChildProcess[] = [];
afterEach(async () => {
  for (const child of children.splice(0)) if (child.exitCode === null) killGroup(child);
  await api?.close();
  await harness?.close();
  api = undefined;
  harness = undefined;
});

function killGroup(child: ChildProcess) {
  try {
    process.kill(-child.pid!, "SIGKILL");
  } catch {
    // already gone
  }
}

interface AgentProcess {
  name: string;
  child: ChildProcess;
  lines: () => { event: string; task?: number; brief?: unknown; message?: string }[];
  exited: Promise<number | null>;
}

function env(name: string, sessionId: string, extra: Record<string, string> = {}) {
  const { DATABASE_URL: _unset, ...inherited } = process.env;
  return {
    ...inherited,
    STEPWISE_URL: api!.url,
    STEPWISE_TOKEN: AGENT_TOKEN,
    STEPWISE_AGENT: name,
    STEPWISE_SESSION: sessionId,
    ...extra,
  };
}

function startAgent(name: string, sessionId: string, extra: Record<string, string> = {}): AgentProcess {
  // detached: its own process group, so killing it also kills the CLI call it is in.
  const child = spawn(process.execPath, [agentScript], {
    env: env(name, sessionId, extra),
    stdio: ["ignore", "pipe", "pipe"],
    detached: true,
  });
  children.push(child);
  let out = "";
  child.stdout!.on("data", (chunk) => (out += chunk));
  child.stderr!.on("data", (chunk) => (out += chunk));
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  return {
    name,
    child,
    exited,
    lines: () =>
      out
        .split("\n")
        .filter((line) => line.startsWith("{"))
        .map((line) => JSON.parse(line)),
  };
}

/** One CLI call, as the named agent (asynchronous: the server answering it runs in this process). */
function runCli(agent: string, sessionId: string, args: string[]): Promise<{ status: number | null; stdout: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], {
      env: env(agent, sessionId),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    child.stdout!.on("data", (chunk) => (stdout += chunk));
    child.on("error", reject);
    child.on("exit", (status) => resolve({ status, stdout }));
  });
}

async function finished(agent: AgentProcess) {
  const code = await agent.exited;
  expect(
    code,
    agent
      .lines()
      .map((line) => JSON.stringify(line))
      .join("\n"),
  ).toBe(0);
}

/** A session whose plan has three waves: 2,3,4 → 5 (after 2 and 3), 6 (after 4) → 7 (after 5 and 6). */
async function sessionWithWaves(options: { agentConcurrency?: number; leaseSeconds?: number }) {
  harness = await startHarness();
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\n");
  const call = (operation: Parameters<typeof invokeOperation>[0], input: unknown) =>
    invokeOperation(operation, { app: harness!.app, identity: PLANNER }, input);
  const created = (await call(agentStart, { goal: "Ship the demo in waves", ...options })) as { session_id: string };
  const task = (n: number, dependencies: number[] = []) => ({
    title: `Wave task ${n}`,
    type: "chore",
    context_hints: [`Read \`README.md\` and add the section for part ${n}.`],
    relevant_file_paths: ["README.md"],
    dependencies,
    ...(n === 5 && { acceptance: ["README.md has a section for part 5", "The section links parts 2 and 3"] }),
  });
  await call(agentUpdate, {
    session: created.session_id,
    payload: {
      add_tasks: [task(2), task(3), task(4), task(5, [2, 3]), task(6, [4]), task(7, [5, 6])],
      update_tasks: [{ id: 1, status: "DONE", notes: "planned in three waves" }],
    },
  });
  const { runId } = (
    await harness.app.db.pool.query<{ runId: string }>('select run_id as "runId" from agent_sessions where id = $1', [
      created.session_id,
    ])
  ).rows[0]!;
  return { sessionId: created.session_id, runId };
}

async function leases(sessionId: string) {
  const rows = await harness!.app.db.pool.query<{ step_id: string; agent: string }>(
    "select step_id, agent from agent_task_leases where session_id = $1 order by step_id",
    [sessionId],
  );
  return rows.rows;
}

/** What the run's events say: each hand-out (in order) and the most tasks leased at once. */
async function handOutHistory(runId: string) {
  const events = await readEvents(harness!.app.db.pool, runId, 0);
  const completedAt = new Map<string, number>();
  const leased: { stepId: string; agent: string; seq: number; brief: unknown }[] = [];
  const open = new Set<string>();
  let most = 0;
  for (const event of events) {
    if (!event.stepId || event.stepId === "step_1") continue;
    if (event.type === "agent.task_leased") {
      const data = event.data as { agent: string; brief: unknown };
      leased.push({ stepId: event.stepId, agent: data.agent, seq: event.seq, brief: data.brief });
      open.add(event.stepId);
      most = Math.max(most, open.size);
    }
    if (event.type === "step.completed") {
      completedAt.set(event.stepId, event.seq);
      open.delete(event.stepId);
    }
    if (event.type === "agent.lease_expired") open.delete(event.stepId);
  }
  return { leased, completedAt, most };
}

const DEPENDENCIES: Record<string, string[]> = {
  step_5: ["step_2", "step_3"],
  step_6: ["step_4"],
  step_7: ["step_5", "step_6"],
};

describe("several agents on one plan, through the CLI", () => {
  it("hands three agents different ready tasks in dependency order, refuses another's task, and gives self-contained briefs", async () => {
    const { sessionId, runId } = await sessionWithWaves({ agentConcurrency: 3 });
    const hold = path.join(harness!.workspace, ".release");
    const agents = ["ada", "bob", "cy"].map((name) => startAgent(name, sessionId, { HOLD_FILE: hold }));

    // The first wave is handed out in parallel: three tasks, three agents, none twice.
    await expect.poll(async () => (await leases(sessionId)).length, { timeout: 120_000, interval: 200 }).toBe(3);
    const wave1 = await leases(sessionId);
    expect(wave1.map((lease) => lease.step_id)).toEqual(["step_2", "step_3", "step_4"]);
    expect(new Set(wave1.map((lease) => lease.agent))).toEqual(new Set(["ada", "bob", "cy"]));

    // Another agent's task is refused, naming its holder; nothing changes.
    const [held, other] = wave1;
    const intruder = await runCli(other!.agent, sessionId, [
      "update",
      "--json",
      JSON.stringify({ update_tasks: [{ id: Number(held!.step_id.slice(5)), status: "DONE" }] }),
    ]);
    expect(intruder.status).toBe(1);
    expect(JSON.parse(intruder.stdout)).toMatchObject({
      status: "error",
      error_type: "invalid_state",
      message: expect.stringContaining(`is leased to agent '${held!.agent}', not to you ('${other!.agent}')`),
    });
    expect((await leases(sessionId)).find((lease) => lease.step_id === held!.step_id)?.agent).toBe(held!.agent);

    await fs.writeFile(hold, "go");
    await Promise.all(agents.map(finished));

    const history = await handOutHistory(runId);
    // Each task handed out exactly once, and only after every task it depends on was done.
    expect(history.leased.map((lease) => lease.stepId).sort()).toEqual([
      "step_2",
      "step_3",
      "step_4",
      "step_5",
      "step_6",
      "step_7",
    ]);
    for (const lease of history.leased) {
      for (const dep of DEPENDENCIES[lease.stepId] ?? []) {
        expect(history.completedAt.get(dep), `${dep} before ${lease.stepId}`).toBeLessThan(lease.seq);
      }
    }
    expect(history.most).toBe(3);

    // Each task was done by the agent it was leased to.
    const run = await harness!.waitForRun(runId, ["completed"]);
    for (const lease of history.leased) {
      const step = run.steps.find((candidate) => candidate.stepId === lease.stepId)!;
      expect(step.result?.value).toMatchObject({ doneBy: lease.agent });
    }

    // The brief of task 5, as stored at hand-out and as its agent received it.
    const lease5 = history.leased.find((lease) => lease.stepId === "step_5")!;
    const brief = taskBriefSchema.parse(lease5.brief);
    const doneBy = (stepId: string) => history.leased.find((lease) => lease.stepId === stepId)!.agent;
    expect(brief).toMatchObject({
      task_id: 5,
      title: "Wave task 5",
      goal: "Ship the demo in waves",
      relevant_file_paths: ["README.md"],
      acceptance: ["README.md has a section for part 5", "The section links parts 2 and 3"],
      dependency_notes: [
        { task_id: 2, title: "Wave task 2", notes: `task 2 done by ${doneBy("step_2")}` },
        { task_id: 3, title: "Wave task 3", notes: `task 3 done by ${doneBy("step_3")}` },
      ],
      working_directory: harness!.workspace,
      assignee: lease5.agent,
    });
    const given = agents.flatMap((agent) => agent.lines()).find((line) => line.event === "handed" && line.task === 5);
    expect({ ...(given!.brief as object), lease_expires_at: undefined }).toEqual({
      ...brief,
      lease_expires_at: undefined,
    });
  }, 300_000);

  it("with a cap of 1 the agents work one task at a time", async () => {
    const { sessionId, runId } = await sessionWithWaves({ agentConcurrency: 1 });
    const agents = ["ada", "bob", "cy"].map((name) => startAgent(name, sessionId));
    await Promise.all(agents.map(finished));
    const history = await handOutHistory(runId);
    expect(history.leased).toHaveLength(6);
    expect(history.most).toBe(1);
  }, 300_000);

  it("returns a killed agent's task to ready when its lease expires, and another agent does it", async () => {
    const { sessionId, runId } = await sessionWithWaves({ agentConcurrency: 3, leaseSeconds: 3 });
    // ada takes a task and works on it until it is killed; it never reports DONE.
    const ada = startAgent("ada", sessionId, { HOLD_FILE: path.join(harness!.workspace, ".never") });
    await expect
      .poll(
        async () => {
          const row = await harness!.app.db.pool.query<{ status: string }>(
            `select rs.status from agent_task_leases l join run_steps rs on rs.run_id = l.run_id and rs.step_id = l.step_id
              where l.session_id = $1 and l.agent = 'ada'`,
            [sessionId],
          );
          return row.rows[0]?.status;
        },
        { timeout: 120_000, interval: 200 },
      )
      .toBe("running");
    const taken = (await leases(sessionId)).find((lease) => lease.agent === "ada")!.step_id;
    killGroup(ada.child);
    await ada.exited;

    const bob = startAgent("bob", sessionId);
    await finished(bob);

    const expired = await harness!.app.db.pool.query<{ step_id: string; detail: { agent: string; reason: string } }>(
      "select step_id, detail from audit_entries where run_id = $1 and action = 'task.lease_expired'",
      [runId],
    );
    expect(expired.rows.map((row) => [row.step_id, row.detail.agent])).toContainEqual([taken, "ada"]);
    expect(expired.rows[0]!.detail.reason).toBe("Lease of ada expired, returned to ready");

    const events = (await readEvents(harness!.app.db.pool, runId, 0)).filter((event) => event.stepId === taken);
    const types = events.map((event) => event.type);
    // ada's start, the expiry returning it to ready, bob's lease, bob's DONE.
    const running = types.indexOf("step.running");
    const returned = types.indexOf("step.awaiting_agent", running);
    const expiry = types.indexOf("agent.lease_expired", running);
    const bobsLease = events.findIndex(
      (event, index) =>
        index > expiry && event.type === "agent.task_leased" && (event.data as { agent: string }).agent === "bob",
    );
    expect(running).toBeGreaterThanOrEqual(0);
    expect(returned).toBeGreaterThan(running);
    expect(expiry).toBeGreaterThan(running);
    expect(bobsLease).toBeGreaterThan(expiry);
    const run = await harness!.waitForRun(runId, ["completed"]);
    expect(run.steps.find((step) => step.stepId === taken)!.result?.value).toMatchObject({ doneBy: "bob" });
  }, 300_000);
});
