import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { registerWorkspace } from "../plans/workspaces";
import { stepTaskFor } from "../queue/jobs";
import { createEngineDeps } from "./engine";
import { resolveServedWorkspaces } from "./served-workspaces";
import { startStepWorker, type StepWorker } from "./worker";

/*
 * Three machines simulated in one box: each has its own folder (its "disk"), holding the
 * workspaces that machine has, and its own in-process worker with its own id. Steps acting in a
 * workspace must land only on a worker serving it; a step nobody serves waits, says so, and runs
 * once a worker serving its workspace starts.
 */

let harness: Harness | undefined;
const workers: StepWorker[] = [];
const folders: string[] = [];

afterEach(async () => {
  await Promise.all(workers.splice(0).map((worker) => worker.stop({ graceMs: 2_000 })));
  await harness?.close();
  harness = undefined;
  await Promise.all(folders.splice(0).map((folder) => fs.rm(folder, { recursive: true, force: true })));
});

/** A machine's own disk, with the workspace directories it has. */
async function machine(...workspaces: string[]): Promise<{ root: string; paths: Record<string, string> }> {
  const root = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-machine-")));
  folders.push(root);
  const paths: Record<string, string> = {};
  for (const name of workspaces) {
    paths[name] = path.join(root, name);
    await fs.mkdir(paths[name]);
  }
  return { root, paths };
}

/** An in-process worker of its own (its own engine, id and heartbeat), serving the named workspaces. */
async function startWorker(h: Harness, names: string[]): Promise<StepWorker> {
  const worker = await startStepWorker(createEngineDeps(h.app.db.pool, h.app.tools), {
    databaseUrl: h.app.db.url,
    concurrency: 2,
    workspaces: { names },
  });
  workers.push(worker);
  return worker;
}

/** e1 (echo, no workspace) → l1..l3 (list_dir, in the workspace) → e2 (echo) → l4 (list_dir). */
async function startChainRun(h: Harness, workspaceId: string): Promise<string> {
  const layer = ["l1", "l2", "l3"];
  const steps = [
    { id: "e1", description: "start", tool: "echo", args: { value: "start" } },
    ...layer.map((id) => ({ id, description: `list ${id}`, tool: "list_dir", args: { path: "." }, dependsOn: ["e1"] })),
    { id: "e2", description: "join", tool: "echo", args: { value: "joined" }, dependsOn: layer },
    { id: "l4", description: "list again", tool: "list_dir", args: { path: "." }, dependsOn: ["e2"] },
  ];
  const plan = await h.caller.plans.createFromJson({
    planJson: JSON.stringify({ goal: `chain in ${workspaceId}`, steps }),
    workspaceId,
  });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: 1 });
  return runId;
}

async function stepWorkers(h: Harness, runId: string): Promise<Record<string, string | null>> {
  const rows = await h.app.db.pool.query<{ step_id: string; worker_id: string | null }>(
    "select step_id, worker_id from run_steps where run_id = $1",
    [runId],
  );
  return Object.fromEntries(rows.rows.map((row) => [row.step_id, row.worker_id]));
}

const LISTS = ["l1", "l2", "l3", "l4"];

describe("work goes where its workspace is", () => {
  it("steps land only on workers serving their workspace; an unserved step waits visibly and runs when one starts", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const machineA = await machine("alpha");
    const machineB = await machine("beta");
    const alpha = await registerWorkspace(h.app.db.pool, machineA.paths.alpha!, "alpha");
    const beta = await registerWorkspace(h.app.db.pool, machineB.paths.beta!, "beta");

    // Machine C serves no workspace ("nowhere" is registered nowhere): only steps that touch none.
    const none = await startWorker(h, ["nowhere"]);
    expect(none.servedWorkspaces()).toEqual([]);
    const alphaRun = await startChainRun(h, alpha.id);
    const betaRun = await startChainRun(h, beta.id);

    // e1 touches no workspace: machine C runs it. Its dependents act in the workspace: C may not
    // take them as continuations, and nobody else can — they wait, and say why.
    for (const [runId, name] of [
      [alphaRun, "alpha"],
      [betaRun, "beta"],
    ] as const) {
      await expect
        .poll(
          async () => {
            const run = await h.caller.runs.get({ runId });
            return run.steps.filter((step) => step.status === "ready" && step.unserved).map((step) => step.stepId);
          },
          { timeout: 30_000, interval: 200 },
        )
        .toEqual(["l1", "l2", "l3"]);
      const run = await h.caller.runs.get({ runId });
      expect(run.steps.find((step) => step.stepId === "l1")!.unserved).toMatch(
        new RegExp(`^No worker serves workspace ${name}\\b`),
      );
      expect((await stepWorkers(h, runId)).e1).toBe(none.id);
      // Their jobs wait under the workspace's own task, the one only its workers list. (Only the
      // waiting steps' jobs: e1's finished job may not be deleted yet when the steps show ready.)
      const jobs = await h.app.db.pool.query<{ task_identifier: string; sql_key: string }>(
        `select task_identifier, left(encode(sha256(convert_to($2, 'UTF8')), 'hex'), 24) as sql_key
           from graphile_worker.jobs where split_part(key, ':', 1) = $1 and split_part(key, ':', 2) = any($3)`,
        [runId, run.workspace.path, ["l1", "l2", "l3"]],
      );
      expect(jobs.rows.map((job) => job.task_identifier)).toEqual(Array(3).fill(stepTaskFor(run.workspace.path)));
      expect(stepTaskFor(run.workspace.path)).toBe(`run_step@${jobs.rows[0]!.sql_key}`);
    }
    const inbox = await h.caller.inbox.list();
    const unserved = inbox.items.filter((item) => item.kind === "workspace_unserved");
    expect(unserved.map((item) => item.kind === "workspace_unserved" && [item.runId, item.workspace]).sort()).toEqual(
      [
        [alphaRun, "alpha"],
        [betaRun, "beta"],
      ].sort(),
    );

    // Machine A starts, serving alpha: alpha's run goes on, beta's still waits.
    const workerA = await startWorker(h, ["alpha"]);
    expect(workerA.servedWorkspaces()).toEqual([machineA.paths.alpha]);
    const alphaDone = await h.waitForRun(alphaRun, ["completed", "failed", "cancelled"], 60_000);
    expect(alphaDone.status).toBe("completed");
    const alphaWorkers = await stepWorkers(h, alphaRun);
    for (const step of LISTS) expect(alphaWorkers[step], step).toBe(workerA.id);
    // A step that touches no workspace goes to any worker.
    expect([none.id, workerA.id]).toContain(alphaWorkers.e2);
    // The listing is of machine A's directory: the step ran where the workspace is.
    expect(alphaDone.steps.find((step) => step.stepId === "l4")!.result?.ok).toBe(true);

    const betaWaiting = await h.caller.runs.get({ runId: betaRun });
    expect(betaWaiting.status).toBe("running");
    expect(betaWaiting.steps.filter((step) => step.unserved).map((step) => step.stepId)).toEqual(["l1", "l2", "l3"]);
    expect(Object.values(await stepWorkers(h, betaRun)).filter((id) => id === workerA.id)).toEqual([]);

    // Machine B starts, serving beta: beta's run completes there.
    const workerB = await startWorker(h, ["beta"]);
    const betaDone = await h.waitForRun(betaRun, ["completed", "failed", "cancelled"], 60_000);
    expect(betaDone.status).toBe("completed");
    const betaWorkers = await stepWorkers(h, betaRun);
    for (const step of LISTS) expect(betaWorkers[step], step).toBe(workerB.id);
    expect(betaDone.steps.some((step) => step.unserved)).toBe(false);
    // Each worker's row says what it serves.
    const rows = await h.app.db.pool.query<{ id: string; workspaces: string[] }>("select id, workspaces from workers");
    const served = Object.fromEntries(rows.rows.map((row) => [row.id, row.workspaces]));
    expect(served).toEqual({
      [none.id]: [],
      [workerA.id]: [machineA.paths.alpha],
      [workerB.id]: [machineB.paths.beta],
    });
    expect((await h.caller.inbox.list()).items.filter((item) => item.kind === "workspace_unserved")).toEqual([]);
  }, 150_000);

  it("a worker named a workspace not registered yet serves it once it is registered", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const machineD = await machine("delta");
    const worker = await startWorker(h, ["delta"]);
    expect(worker.servedWorkspaces()).toEqual([]);
    const delta = await registerWorkspace(h.app.db.pool, machineD.paths.delta!, "delta");
    // The registration's NOTIFY makes the worker look again, record it and restart its runner.
    await expect.poll(() => worker.servedWorkspaces(), { timeout: 30_000 }).toEqual([machineD.paths.delta]);
    await expect
      .poll(
        async () =>
          (
            await h.app.db.pool.query<{ workspaces: string[] }>("select workspaces from workers where id = $1", [
              worker.id,
            ])
          ).rows[0]!.workspaces,
        { timeout: 30_000 },
      )
      .toEqual([machineD.paths.delta]);
    const runId = await startChainRun(h, delta.id);
    const run = await h.waitForRun(runId, ["completed", "failed", "cancelled"], 60_000);
    expect(run.status).toBe("completed");
    const ran = await stepWorkers(h, runId);
    for (const step of [...LISTS, "e1", "e2"]) expect(ran[step], step).toBe(worker.id);
  }, 120_000);

  it("by default a worker serves the registered workspaces whose folder exists on its machine, and its own", async () => {
    harness = await startHarness({ worker: false });
    const h = harness;
    const here = await machine("present", "gone", "own");
    const present = await registerWorkspace(h.app.db.pool, here.paths.present!, "present");
    await registerWorkspace(h.app.db.pool, here.paths.gone!, "gone");
    // Registered elsewhere; this machine does not have the folder.
    await fs.rm(here.paths.gone!, { recursive: true });
    const resolved = await resolveServedWorkspaces(h.app.db.pool, { defaultWorkspace: here.paths.own });
    expect(resolved.paths).toEqual([present.path, here.paths.own].sort());
    // Named: only those, and a name nobody registered is reported.
    const named = await resolveServedWorkspaces(h.app.db.pool, { names: ["present", "unknown"] });
    expect(named).toEqual({ paths: [present.path], unknown: ["unknown"] });
  });
});
