import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { reportsIntegrated, startHarness, type Harness } from "../../tests/app-harness";
import { git } from "../../tests/git-fixture";
import { createEngineDeps } from "../engine/engine";
import { startStepWorker, type StepWorker } from "../engine/worker";
import type { Identity } from "../identity";
import { agentStart, agentStatus, agentSuggest, agentUpdate } from "../operations/agent";
import { invokeOperation, type Operation } from "../operations/operation";
import { runCancel } from "../operations/runs";
import { registerWorkspace } from "../plans/workspaces";
import { planValidationFailedSchema, readyForTaskSchema, successSchema, type AgentTaskView } from "./contract";
import { integrationBranch, runShort } from "./worktrees";
import { worktreeWorkSettled } from "./worktrees-ahead";
import { agentWorkspaceWork } from "./workspace-call-worker";
import { createPool } from "../db";
import { startProxyToDatabase, throughProxy, type TcpProxy } from "../../tests/tcp-proxy";

/*
 * Agent workspace work goes where the workspace is (issue 41): the process answering the agent
 * here has no worker of its own (a web process); workspace "alpha" is on another "machine" (a
 * folder of its own) whose worker serves it. The task's worktree is made by that worker, its DONE
 * merged there, the next task's worktree made ahead there and the cancelled run's removed there;
 * with no worker serving alpha the hand-out says so and nothing changes. A process
 * whose own worker serves the workspace (one machine) does all of it itself: no call is made.
 */

let harness: Harness | undefined;
const workers: StepWorker[] = [];
const folders: string[] = [];
const closing: (() => Promise<unknown>)[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ graceMs: 2_000 })));
  await worktreeWorkSettled();
  for (const close of closing.splice(0).reverse()) await close();
  await harness?.close();
  harness = undefined;
  await Promise.all(folders.splice(0).map((folder) => fs.rm(folder, { recursive: true, force: true })));
});

const AGENT: Identity = { kind: "agent", name: "agent-41" };

function call<I extends z.ZodType, O extends z.ZodType>(operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity: AGENT }, input);
}

/** Machine A's disk with workspace "alpha", a git repository, registered. */
async function machineWithAlpha(h: Harness): Promise<string> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-machine-")));
  folders.push(root);
  const alpha = path.join(root, "alpha");
  await fs.mkdir(path.join(alpha, "src"), { recursive: true });
  await fs.writeFile(path.join(alpha, "src/a.txt"), "a\n");
  git(alpha, "init", "--quiet", "--initial-branch=main");
  git(alpha, "add", "--all");
  git(alpha, "commit", "--quiet", "--message=initial");
  await registerWorkspace(h.app.db.pool, alpha, "alpha");
  return alpha;
}

/** Machine A's worker: its own engine and id, serving alpha, with the agent workspace tasks. */
async function startWorkerServing(h: Harness, names: string[]): Promise<StepWorker> {
  const worker = await startStepWorker(createEngineDeps(h.app.db.pool, h.app.tools), {
    databaseUrl: h.app.db.url,
    concurrency: 2,
    workspaces: { names },
    extra: (identity) => ({ tasks: {}, ...agentWorkspaceWork(() => h.app, identity) }),
  });
  workers.push(worker);
  return worker;
}

async function stepStatus(h: Harness, runId: string, stepId: string): Promise<string | undefined> {
  const rows = await h.app.db.pool.query<{ status: string }>(
    "select status from run_steps where run_id = $1 and step_id = $2",
    [runId, stepId],
  );
  return rows.rows[0]?.status;
}

async function startAlphaSession(h: Harness, alpha: string): Promise<string> {
  await call(agentStart, { goal: "Change a on machine A", workspace: alpha });
  const { runId } = (await h.app.db.pool.query<{ runId: string }>('select run_id as "runId" from agent_sessions'))
    .rows[0]!;
  // The decomposition task acts in alpha: a worker serving alpha takes it to the agent.
  await expect.poll(() => stepStatus(h, runId, "step_1"), { timeout: 60_000, interval: 100 }).toBe("awaiting_agent");
  return runId;
}

/** Asks `status` until it hands a task out (the first call syncs the instructions). */
async function handedOutTask(): Promise<AgentTaskView> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const parsed = readyForTaskSchema.safeParse(await call(agentStatus, {}));
    if (parsed.success) return parsed.data.now.current_task;
    if (Date.now() > deadline) throw new Error("no task was handed out");
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface CallRow {
  kind: string;
  worker_id: string | null;
  error: unknown;
  finished: boolean;
}

async function calls(h: Harness): Promise<CallRow[]> {
  const rows = await h.app.db.pool.query<CallRow>(
    "select kind, worker_id, error, finished_at is not null as finished from agent_workspace_calls order by created_at",
  );
  return rows.rows;
}

describe("agent workspace work goes where the workspace is", () => {
  it("a web process without a worker has the task's worktree made, and its DONE merged, by the worker serving the workspace", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    expect(h.app.engine.localWorker).toBeUndefined();
    const alpha = await machineWithAlpha(h);
    const workerA = await startWorkerServing(h, ["alpha"]);
    expect(workerA.servedWorkspaces()).toEqual([alpha]);
    const runId = await startAlphaSession(h, alpha);

    const task = await handedOutTask();
    const worktree = path.join(alpha, `.stepwise/worktrees/${runShort(runId)}-step_1`);
    expect(task.working_directory).toBe(worktree);
    expect((await fs.stat(worktree)).isDirectory()).toBe(true);
    expect(git(alpha, "worktree", "list", "--porcelain")).toContain(`worktree ${worktree}\n`);
    // Made by machine A's worker, through the call's row.
    const handOuts = (await calls(h)).filter((row) => row.kind === "hand_out");
    expect(handOuts.length).toBeGreaterThan(0);
    for (const row of handOuts) expect(row).toMatchObject({ worker_id: workerA.id, error: null, finished: true });

    // The agent's work, then DONE: committed, and merged into the run's integration branch by A's worker.
    await fs.writeFile(path.join(worktree, "src/a.txt"), "a from machine A\n");
    successSchema.parse(
      await call(agentUpdate, {
        payload: {
          add_tasks: [
            {
              title: "Check a",
              type: "chore",
              context_hints: ["Read `src/a.txt` and check its one line."],
              relevant_file_paths: ["src/a.txt"],
            },
          ],
          update_tasks: [{ id: 1, status: "DONE", notes: "a changed" }],
        },
      }),
    );
    // Integrated off the call, by A's worker: the report's call names it.
    await reportsIntegrated(h.app.db.pool);
    expect(git(alpha, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a from machine A\n");
    expect(await stepStatus(h, runId, "step_1")).toBe("completed");
    const integrations = (await calls(h)).filter((row) => row.kind === "finish_report");
    expect(integrations).toEqual([{ kind: "finish_report", worker_id: workerA.id, error: null, finished: true }]);
    // The merged worktree goes after the merge, on A's worker too.
    await expect
      .poll(
        () =>
          fs.stat(worktree).then(
            () => "present",
            () => "gone",
          ),
        { timeout: 60_000, interval: 100 },
      )
      .toBe("gone");
    const cleanups = (await calls(h)).filter((row) => row.kind === "after_updates");
    expect(cleanups.map((row) => row.worker_id)).toEqual([workerA.id]);

    // Task 2, ready now, gets its worktree ahead of its hand-out — on A's worker.
    const ahead = path.join(alpha, `.stepwise/worktrees/${runShort(runId)}-step_2`);
    await expect
      .poll(
        () =>
          fs.stat(ahead).then(
            () => "present",
            () => "absent",
          ),
        { timeout: 60_000, interval: 100 },
      )
      .toBe("present");
    const aheadCalls = (await calls(h)).filter((row) => row.kind === "ahead");
    expect(aheadCalls.length).toBeGreaterThan(0);
    for (const row of aheadCalls) expect(row).toMatchObject({ worker_id: workerA.id, error: null });

    // Cancelled: the run's worktrees go, removed by A's worker too.
    await call(runCancel, { runId });
    await expect
      .poll(
        async () =>
          (await fs.readdir(path.join(alpha, ".stepwise/worktrees"))).filter((name) =>
            name.startsWith(runShort(runId)),
          ),
        { timeout: 60_000, interval: 100 },
      )
      .toEqual([]);
    // The directory is gone a moment before the worker records the call finished.
    await expect
      .poll(async () => (await calls(h)).filter((row) => row.kind === "remove_run"), { timeout: 60_000, interval: 100 })
      .toEqual([{ kind: "remove_run", worker_id: workerA.id, error: null, finished: true }]);
  });

  it("an added task's files and suggest's markers are looked for by the worker serving the workspace", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const alpha = await machineWithAlpha(h);
    await fs.writeFile(path.join(alpha, "src/b.ts"), "// TODO: name the constant\nexport const b = 1;\n");
    const workerA = await startWorkerServing(h, ["alpha"]);
    await startAlphaSession(h, alpha);
    await handedOutTask();

    // The gates look for the named files where alpha is: the one there passes, the missing one is named.
    const refused = planValidationFailedSchema.parse(
      await call(agentUpdate, {
        payload: {
          add_tasks: [
            {
              title: "Name b's constant",
              type: "chore",
              context_hints: ["Read `src/b.ts` and name its constant."],
              relevant_file_paths: ["src/b.ts", "src/missing.ts"],
            },
          ],
        },
      }),
    );
    expect(refused.details).toEqual([expect.stringContaining("`src/missing.ts`")]);
    const lookups = (await calls(h)).filter((row) => row.kind === "paths_exist");
    expect(lookups).toEqual([{ kind: "paths_exist", worker_id: workerA.id, error: null, finished: true }]);

    // suggest reads the markers of alpha's files on A's worker too.
    const { suggestions } = (await call(agentSuggest, {})) as { suggestions: { title: string }[] };
    expect(suggestions.map((suggestion) => suggestion.title)).toContainEqual(
      expect.stringContaining("TODO in src/b.ts:1: name the constant"),
    );
    const markers = (await calls(h)).filter((row) => row.kind === "todo_markers");
    expect(markers).toEqual([{ kind: "todo_markers", worker_id: workerA.id, error: null, finished: true }]);
  }, 120_000);

  it("a process whose own worker serves the workspace does the work itself, asking no worker", async () => {
    harness = await startHarness();
    const h = harness;
    const root = await fs.realpath(h.workspace);
    await fs.writeFile(path.join(root, "a.txt"), "a\n");
    git(root, "init", "--quiet", "--initial-branch=main");
    git(root, "add", "--all");
    git(root, "commit", "--quiet", "--message=initial");
    await call(agentStart, { goal: "Change a here" });
    const { runId } = (await h.app.db.pool.query<{ runId: string }>('select run_id as "runId" from agent_sessions'))
      .rows[0]!;
    const task = await handedOutTask();
    expect(task.working_directory).toBe(path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_1`));
    await fs.writeFile(path.join(task.working_directory!, "a.txt"), "a changed here\n");
    successSchema.parse(await call(agentUpdate, { payload: { update_tasks: [{ id: 1, status: "DONE" }] } }));
    await reportsIntegrated(h.app.db.pool);
    expect(git(root, "show", `${integrationBranch(runId)}:a.txt`)).toBe("a changed here\n");
    await worktreeWorkSettled();
    // The one call is the DONE's integration, queued so that it outlives this process, and taken
    // by this process's own worker.
    expect(await calls(h)).toEqual([
      { kind: "finish_report", worker_id: h.app.engine.localWorker!.workerId, error: null, finished: true },
    ]);
  });

  it("a call whose take's answer the network lost is taken again by the same worker, not left for an hour", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const alpha = await machineWithAlpha(h);
    // Machine A's worker reaches the database through a proxy that can lose an answer.
    const proxy: TcpProxy = await startProxyToDatabase(h.app.db.url);
    closing.push(() => proxy.close());
    const url = throughProxy(h.app.db.url, proxy);
    const pool = createPool(url, { max: 4, applicationName: "machine A" });
    closing.push(() => pool.end());
    const appOfA = { ...h.app, db: { ...h.app.db, url, pool } };
    const workerA = await startStepWorker(createEngineDeps(pool, h.app.tools), {
      databaseUrl: url,
      concurrency: 2,
      workspaces: { names: ["alpha"] },
      extra: (identity) => ({ tasks: {}, ...agentWorkspaceWork(() => appOfA, identity) }),
    });
    workers.push(workerA);
    await startAlphaSession(h, alpha);

    // The take of the hand-out's call commits; the worker never hears so.
    proxy.loseRowsReplyOf(/update agent_workspace_calls set worker_id/);
    const task = await handedOutTask();
    expect(proxy.lostReplies()).toBe(1);
    expect((await fs.stat(task.working_directory!)).isDirectory()).toBe(true);
    const handOuts = (await calls(h)).filter((row) => row.kind === "hand_out");
    for (const row of handOuts) expect(row).toMatchObject({ worker_id: workerA.id, error: null, finished: true });
  }, 90_000);

  it("with no worker serving the workspace, a hand-out answers so and changes nothing", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const alpha = await machineWithAlpha(h);
    const workerA = await startWorkerServing(h, ["alpha"]);
    const runId = await startAlphaSession(h, alpha);
    // Machine A's worker stops: nobody serves alpha any more.
    await workerA.stop({ graceMs: 2_000 });

    let answer: unknown;
    for (let attempt = 0; attempt < 3 && answer === undefined; attempt++) {
      // The first status may only sync the instructions; the hand-out comes after.
      answer = await call(agentStatus, {}).then(
        () => undefined,
        (error: unknown) => error,
      );
    }
    expect(answer).toMatchObject({
      code: "unavailable",
      message: expect.stringMatching(/^No worker serves workspace alpha\b/),
      details: { reason: "workspace_unserved", workspace: { path: alpha, name: "alpha" }, retry: true },
    });
    // Nothing changed: no lease, no call, no worktree, and the task still waits for an agent.
    expect((await h.app.db.pool.query("select 1 from agent_task_leases")).rowCount).toBe(0);
    expect(await calls(h)).toEqual([]);
    const worktrees = await fs.readdir(path.join(alpha, ".stepwise/worktrees")).catch(() => []);
    expect(worktrees.filter((name) => name.startsWith(runShort(runId)))).toEqual([]);
    expect(await stepStatus(h, runId, "step_1")).toBe("awaiting_agent");
  });
});
