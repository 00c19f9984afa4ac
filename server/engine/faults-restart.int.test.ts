import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { createProbeRegistry, illegalTransitions, readProbeLog, sequenceProblems } from "../../tests/probe-tool";
import { spawnProbeWorker, type ProbeWorkerProcess } from "../../tests/probe-worker";
import { createAppContext } from "../app-context";
import type { AppContext } from "../services";
import { migrateDatabase } from "../cli/bootstrap";
import { findFreePort, startEmbeddedPostgres, type EmbeddedDatabase } from "../db/embedded";
import { readEvents } from "../events/store";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";

/**
 * The database server itself goes away mid-run and comes back: a PostgreSQL server of its own
 * (the shared test server must stay up for the other test files), stopped with a fast shutdown —
 * every session ended, nothing accepted — while a worker process has steps in flight.
 */

const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

describe("the database server restarted mid-run", () => {
  it("the worker process survives and reconnects; the run completes once, gap-free, nothing run twice", async () => {
    const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-restart-pg-"));
    cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
    const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-ws-"));
    cleanups.push(() => fs.rm(workspace, { recursive: true, force: true }));
    const port = await findFreePort();
    let server: EmbeddedDatabase = await startEmbeddedPostgres({ dataDir, port, database: "stepwise" });
    cleanups.push(() => server.stop());
    await migrateDatabase(server.databaseUrl);
    const app: AppContext = await createAppContext({
      databaseUrl: server.databaseUrl,
      workspaceRoot: workspace,
      worker: false,
      tools: createProbeRegistry(),
    });
    cleanups.push(() => app.close());
    const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));

    const probeLog = path.join(workspace, "probe.log");
    const worker: ProbeWorkerProcess = spawnProbeWorker({
      databaseUrl: server.databaseUrl,
      probeLog,
      workspace,
      heartbeatMs: 200,
    });
    cleanups.push(() => worker.kill());
    await worker.ready;

    // Not idempotent, so a step run a second time would show in the probe log.
    const steps = [
      ...Array.from({ length: 12 }, (_, i) => ({
        id: `chain_${i + 1}`,
        tool: "probe_once",
        args: { sleepMs: 300 },
        dependsOn: i ? [`chain_${i}`] : [],
      })),
      ...Array.from({ length: 10 }, (_, i) => ({ id: `fan_${i + 1}`, tool: "probe_once", args: { sleepMs: 500 * i } })),
    ];
    const plan = await caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "restart", steps }) });
    const { runId } = await caller.plans.approve({ planId: plan.id, version: plan.version });
    await expect
      .poll(
        async () =>
          (
            await app.db.pool.query<{ n: number }>(
              "select count(*)::int as n from run_steps where run_id = $1 and status = 'running'",
              [runId],
            )
          ).rows[0]!.n,
        { timeout: 30_000, interval: 50 },
      )
      .toBeGreaterThanOrEqual(3);

    await server.stop();
    // Down for longer than every lease (five beats of 200 ms): steps finish meanwhile, their
    // outcomes waiting to be written.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    server = await startEmbeddedPostgres({ dataDir, port, database: "stepwise" });

    // The test's own pools reconnect too; a query may still fail on a connection from before.
    await expect
      .poll(
        () =>
          caller.runs.get({ runId }).then(
            (run) => run.status,
            () => "unreachable",
          ),
        {
          timeout: 90_000,
          interval: 100,
        },
      )
      .toBe("completed");
    expect(worker.child.exitCode).toBe(null);
    expect(worker.child.signalCode).toBe(null);
    const run = await caller.runs.get({ runId });
    expect(run.steps.map((s) => `${s.stepId}:${s.status}:${s.attempt}`)).toEqual(
      steps.map((s) => `${s.id}:completed:1`),
    );
    const executions = (await readProbeLog(probeLog)).map((e) => e.stepId).sort();
    expect(executions).toEqual(steps.map((s) => s.id).sort());
    const events = await readEvents(app.db.pool, runId, 0);
    expect(sequenceProblems(events)).toEqual([]);
    expect(illegalTransitions(events)).toEqual([]);
    expect(events.filter((e) => e.type === "step.interrupted")).toEqual([]);
    expect(events.filter((e) => e.type === "step.completed")).toHaveLength(steps.length);
  }, 600_000);
});
