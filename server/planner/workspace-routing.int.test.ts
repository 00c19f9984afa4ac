import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { goodPlan } from "../../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { createAppContext } from "../app-context";
import { inTransaction } from "../db";
import { readEvents } from "../events/store";
import { registerWorkspace } from "../plans/workspaces";
import { PLANNING_TASK } from "../queue/jobs";
import type { AppContext } from "../services";
import { readPlannerConfig } from "./config";
import { createPlannerDeps, installPlanner } from "./deps";

/*
 * Planning sessions go where their workspace is, like steps (server/engine/workspace-routing.int.test.ts):
 * three machines simulated in one box, each with its own folder and its own worker process (an app
 * context with a worker serving the named workspaces, the planner installed). A session reads its
 * workspace's files, so only a worker serving that workspace may take it; one nobody serves says
 * so in its status and starts when a serving worker does. A job queued under the plain task name
 * (before sessions were routed) still runs, on a worker serving the workspace.
 */

let harness: Harness | undefined;
let llm: ScriptedLlm | undefined;
const machines: AppContext[] = [];
const folders: string[] = [];

afterEach(async () => {
  await Promise.all(machines.splice(0).map((machine) => machine.close()));
  await llm?.close();
  llm = undefined;
  await harness?.close();
  harness = undefined;
  await Promise.all(folders.splice(0).map((folder) => fs.rm(folder, { recursive: true, force: true })));
});

const providerEnv = (baseUrl: string) => ({
  STEPWISE_LLM_BASE_URL: baseUrl,
  STEPWISE_LLM_MODELS: "scripted-planner",
  STEPWISE_LLM_NAME: "Scripted",
  STEPWISE_PLANNER_RETRIES: "0",
  STEPWISE_PLANNER_TIMEOUT_MS: "60000",
});
const plannerConfig = (baseUrl: string) => readPlannerConfig(providerEnv(baseUrl));

/**
 * A machine's worker can take a waiting session the moment it starts, before `installPlanner`
 * runs; it then plans with the planner made from the environment. So the environment names the
 * scripted provider too while a test runs (restored after it: files share this process).
 */
const savedEnv = new Map<string, string | undefined>();
function useScriptedProvider(baseUrl: string): void {
  for (const [name, value] of Object.entries(providerEnv(baseUrl))) {
    if (!savedEnv.has(name)) savedEnv.set(name, process.env[name]);
    process.env[name] = value;
  }
}
afterEach(() => {
  for (const [name, value] of savedEnv) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  savedEnv.clear();
});

/** A machine's own disk with one workspace folder, holding a README that names it. */
async function disk(name: string): Promise<string> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-machine-")));
  folders.push(root);
  const workspace = path.join(root, name);
  await fs.mkdir(workspace);
  await fs.writeFile(path.join(workspace, "README.md"), `# ${name}\nThe ${name.toUpperCase()}-MARKER project.\n`);
  return workspace;
}

/** A worker process on a machine: its own app context, serving the named workspaces, planner installed. */
async function startMachine(h: Harness, baseUrl: string, names: string[]): Promise<AppContext> {
  useScriptedProvider(baseUrl);
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-machine-")));
  folders.push(root);
  const machine = await createAppContext({
    databaseUrl: h.app.db.url,
    workspaceRoot: root,
    worker: { concurrency: 2, workspaces: names },
  });
  machines.push(machine);
  installPlanner(machine, createPlannerDeps(machine, plannerConfig(baseUrl)));
  return machine;
}

/** The session's job in the queue: its task and whether a worker holds it. */
async function jobOf(h: Harness, sessionId: string) {
  const rows = await h.app.db.pool.query<{ task_identifier: string; locked: boolean }>(
    "select task_identifier, locked_at is not null as locked from graphile_worker.jobs where key = $1",
    [`planning:${sessionId}`],
  );
  return rows.rows[0];
}

/** The task of a workspace's planning sessions, computed by the database (as operations.md says). */
async function sqlTask(h: Harness, workspace: string): Promise<string> {
  const rows = await h.app.db.pool.query<{ task: string }>(
    `select $1 || '@' || left(encode(sha256(convert_to($2, 'UTF8')), 'hex'), 24) as task`,
    [PLANNING_TASK, workspace],
  );
  return rows.rows[0]!.task;
}

async function sessionRow(h: Harness, sessionId: string) {
  const rows = await h.app.db.pool.query<{ status: string; phase: string; worker_id: string | null }>(
    "select status, phase, worker_id from planning_sessions where id = $1",
    [sessionId],
  );
  return rows.rows[0]!;
}

/** A model reply held until `release`: while it is held, the session's owner can be read. */
function heldReply(scripted: ScriptedLlm): () => void {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  scripted.script(async () => {
    await held;
    return { json: goodPlan };
  });
  return release;
}

/** Plays one session's model call on whichever worker takes it; returns the worker that held it. */
async function planOnce(h: Harness, scripted: ScriptedLlm, sessionId: string): Promise<string | null> {
  const before = scripted.requests.length;
  const release = heldReply(scripted);
  await expect
    .poll(() => scripted.requests.length, { timeout: 60_000, interval: 100 })
    .toBe(before + 1)
    .catch(async (error: unknown) => {
      // What the queue and the session looked like when the model call never came.
      const seen = {
        session: await sessionRow(h, sessionId),
        job: await h.app.db.pool.query(
          "select task_identifier, locked_at, locked_by, attempts, last_error, run_at from graphile_worker.jobs where key = $1",
          [`planning:${sessionId}`],
        ),
        workers: await h.app.db.pool.query("select id, workspaces from workers"),
      };
      throw new Error(
        `${(error as Error).message}\n${JSON.stringify({ ...seen, job: seen.job.rows, workers: seen.workers.rows })}`,
      );
    });
  const owner = (await sessionRow(h, sessionId)).worker_id;
  release();
  await expect
    .poll(async () => (await h.caller.planner.session({ sessionId })).status, { timeout: 60_000, interval: 100 })
    .toBe("completed");
  return owner;
}

describe("planning sessions go where their workspace is", () => {
  it("a session runs only on a worker serving its workspace; one nobody serves says so and runs when one starts", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    llm = await startScriptedLlm();
    const scripted = llm;
    installPlanner(h.app, createPlannerDeps(h.app, plannerConfig(scripted.baseUrl)));
    const alphaPath = await disk("alpha");
    const betaPath = await disk("beta");
    const alpha = await registerWorkspace(h.app.db.pool, alphaPath, "alpha");
    const beta = await registerWorkspace(h.app.db.pool, betaPath, "beta");

    // Machine C serves no workspace: it may take no planning session.
    const none = await startMachine(h, scripted.baseUrl, ["nowhere"]);
    expect(none.worker!.servedWorkspaces()).toEqual([]);

    const { sessionId: betaSession } = await h.caller.planner.start({
      goal: "Show beta's README",
      mode: "quick",
      workspaceId: beta.id,
    });
    // Alpha's session as queued before sessions were routed: its job under the plain task name,
    // which every worker lists. Machine C takes it, and only queues it again under alpha's task.
    const { sessionId: alphaSession } = await h.caller.planner.start({
      goal: "Show alpha's README",
      mode: "quick",
      workspaceId: alpha.id,
    });
    await inTransaction(h.app.db.pool, async (client) => {
      await client.query("select graphile_worker.remove_job($1)", [`planning:${alphaSession}`]);
      await client.query(
        "select graphile_worker.add_job($1, json_build_object('sessionId', $2::text), job_key := $3)",
        [PLANNING_TASK, alphaSession, `planning:${alphaSession}`],
      );
    });
    const alphaTask = await sqlTask(h, alphaPath);
    const betaTask = await sqlTask(h, betaPath);
    await expect
      .poll(() => jobOf(h, alphaSession), { timeout: 60_000, interval: 100 })
      .toEqual({ task_identifier: alphaTask, locked: false });
    expect(await jobOf(h, betaSession)).toEqual({ task_identifier: betaTask, locked: false });

    // Nobody serves either workspace: each session says so wherever its status is read.
    for (const [sessionId, name] of [
      [alphaSession, "alpha"],
      [betaSession, "beta"],
    ] as const) {
      const session = await h.caller.planner.session({ sessionId });
      expect(session).toMatchObject({ status: "running", phase: "queued" });
      expect(session.unserved).toBe(
        `No worker serves workspace ${name}: planning waits until a worker serving it starts`,
      );
      const status = await h.caller.planner.command({ command: "/plan status", sessionId });
      expect(status.message).toContain(`No worker serves workspace ${name}`);
      expect(status.message).not.toContain("waiting for a worker");
    }
    expect(scripted.requests).toHaveLength(0);

    // Machine A starts, serving alpha: alpha's session is planned there, with alpha's files.
    const machineA = await startMachine(h, scripted.baseUrl, ["alpha"]);
    expect(machineA.worker!.servedWorkspaces()).toEqual([alphaPath]);
    expect(await planOnce(h, scripted, alphaSession)).toBe(machineA.worker!.id);
    expect(JSON.stringify(scripted.requests[0]!.messages)).toContain("ALPHA-MARKER");
    expect((await h.caller.planner.session({ sessionId: alphaSession })).unserved).toBeNull();

    // Beta's session still waits, untouched by the two running workers, and still says why.
    const betaWaiting = await h.caller.planner.session({ sessionId: betaSession });
    expect(betaWaiting).toMatchObject({ status: "running", phase: "queued" });
    expect(betaWaiting.unserved).toMatch(/^No worker serves workspace beta\b/);
    expect(await jobOf(h, betaSession)).toEqual({ task_identifier: betaTask, locked: false });
    const betaEvents = (await readEvents(h.app.db.pool, betaSession, 0)).map((event) => event.type);
    expect(betaEvents).not.toContain("planning.started");

    // Machine B starts, serving beta: beta's session is planned there.
    const machineB = await startMachine(h, scripted.baseUrl, ["beta"]);
    expect(await planOnce(h, scripted, betaSession)).toBe(machineB.worker!.id);
    expect(JSON.stringify(scripted.requests[1]!.messages)).toContain("BETA-MARKER");
    const done = await h.caller.planner.session({ sessionId: betaSession });
    expect(done.unserved).toBeNull();
    expect((await h.caller.planner.command({ command: "/plan status", sessionId: betaSession })).message).not.toContain(
      "No worker serves",
    );
    expect(scripted.requests).toHaveLength(2);
  }, 180_000);
});
