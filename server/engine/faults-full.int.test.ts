import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { afterEach, describe, expect, it } from "vitest";
import { createProbeRegistry, illegalTransitions, readProbeLog } from "../../tests/probe-tool";
import { spawnProbeWorker } from "../../tests/probe-worker";
import { createAppContext } from "../app-context";
import { migrateDatabase } from "../cli/bootstrap";
import { startEmbeddedPostgres } from "../db/embedded";
import { readEvents } from "../events/store";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";

/**
 * A full database is a wait, not a failure: a step whose command is about to start when the
 * server refuses every new connection ("too many connections", 53300) goes back to ready and is
 * made again once connections free up, costing none of its retries. The server is one of its own
 * (the shared test server must keep serving other files); the app role's CONNECTION LIMIT is
 * lowered to nothing and the worker's engine connections are ended, so its next query needs a new one.
 */
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup().catch(() => undefined);
});

describe("the database full while a step starts", () => {
  it(
    "the step is not failed; it runs once connections free up, its single attempt intact",
    { timeout: 600_000 },
    async () => {
      const dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-full-pg-"));
      cleanups.push(() => fs.rm(dataDir, { recursive: true, force: true }));
      const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-ws-"));
      cleanups.push(() => fs.rm(workspace, { recursive: true, force: true }));
      const server = await startEmbeddedPostgres({ dataDir, database: "stepwise" });
      cleanups.push(() => server.stop());
      await migrateDatabase(server.databaseUrl);
      const admin = new pg.Client({ connectionString: server.serverUrl });
      await admin.connect();
      cleanups.push(() => admin.end());
      const appRole = decodeURIComponent(new URL(server.databaseUrl).username);

      const app = await createAppContext({
        databaseUrl: server.databaseUrl,
        workspaceRoot: workspace,
        worker: false,
        tools: createProbeRegistry(),
      });
      cleanups.push(() => app.close());
      const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
      const probeLog = path.join(workspace, "probe.log");
      const worker = spawnProbeWorker({ databaseUrl: server.databaseUrl, probeLog, workspace, heartbeatMs: 200 });
      cleanups.push(() => worker.kill());
      await worker.ready;

      // One attempt allowed: a failure, or an attempt spent on the wait, would fail the run.
      const plan = await caller.plans.createFromJson({
        planJson: JSON.stringify({
          goal: "full database",
          steps: [
            { id: "effect", tool: "probe_effect", args: { sleepBeforeEffectMs: 3_000 }, retry: { maxAttempts: 1 } },
          ],
        }),
      });
      const { runId } = await caller.plans.approve({ planId: plan.id, version: plan.version });
      await expect
        .poll(async () => (await caller.runs.get({ runId })).steps.find((step) => step.stepId === "effect")?.status, {
          interval: 50,
        })
        .toBe("running");

      // Before its command starts: no new connection for the app role, and none kept by the engines.
      await admin.query(`alter role "${appRole}" connection limit 0`);
      await admin.query(
        `select pg_terminate_backend(pid) from pg_stat_activity where usename = $1 and application_name = 'stepwise'`,
        [appRole],
      );
      // Long past the step's start and its wait for the database (10 s).
      await new Promise((resolve) => setTimeout(resolve, 20_000));
      await admin.query(`alter role "${appRole}" connection limit -1`);

      await expect
        .poll(
          () =>
            caller.runs.get({ runId }).then(
              (run) => run.status,
              () => "unreachable",
            ),
          { timeout: 120_000, interval: 200 },
        )
        .toBe("completed");
      const run = await caller.runs.get({ runId });
      const step = run.steps.find((candidate) => candidate.stepId === "effect");
      expect(step?.status).toBe("completed");
      expect(step?.attempt).toBe(1);
      const events = await readEvents(app.db.pool, runId, 0);
      expect(events.some((event) => event.type === "step.failed")).toBe(false);
      const waits = events.filter(
        (event) =>
          event.type === "step.retrying" && (event.data as { waitingForDatabase?: boolean }).waitingForDatabase,
      );
      expect(waits.length).toBeGreaterThanOrEqual(1);
      expect(illegalTransitions(events)).toEqual([]);
      // Its command ran once, as attempt 1: the wait spent no attempt.
      const executions = await readProbeLog(probeLog);
      expect(executions.map((execution) => execution.attempt)).toEqual([1]);
      expect(worker.child.exitCode).toBe(null);
    },
  );
});
