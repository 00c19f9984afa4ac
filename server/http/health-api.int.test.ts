import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startApiServer } from "../../tests/door-http-server";
import { startProxyToDatabase, throughProxy, type TcpProxy } from "../../tests/tcp-proxy";
import { createTestDatabase } from "../../tests/test-database";
import { createAppContext } from "../app-context";
import type { AppContext } from "../services";
import { checkReadiness } from "../ops/readiness";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";

/**
 * The probes and the metrics, over HTTP behind the real door: `/api/health` and `/api/ready` answer
 * anyone, `/api/ready` says which check failed (the database cut off by a TCP proxy, no worker
 * beating, a migration not applied), and `/metrics` answers only an admin or the metrics credential.
 */

const ACCESS_TOKEN = "health-access-token";
const AGENT_TOKEN = "health-agent-token";
const METRICS_TOKEN = "health-metrics-token";
let database: Awaited<ReturnType<typeof createTestDatabase>>;
let proxy: TcpProxy;
let app: AppContext;
let api: Awaited<ReturnType<typeof startApiServer>>;
let workspace: string;

beforeAll(async () => {
  database = await createTestDatabase();
  proxy = await startProxyToDatabase(database.url);
  workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-health-"));
  app = await createAppContext({
    databaseUrl: throughProxy(database.url, proxy),
    workspaceRoot: workspace,
    worker: { concurrency: 2 },
  });
  api = await startApiServer(app, { agentToken: AGENT_TOKEN, accessToken: ACCESS_TOKEN, metricsToken: METRICS_TOKEN });
});

afterAll(async () => {
  await api?.close();
  await app?.close();
  await proxy?.close();
  await database?.drop({ tools: app?.tools });
  await fs.rm(workspace, { recursive: true, force: true });
});

interface ReadyBody {
  status: string;
  checks: Record<"database" | "migrations" | "worker", { ok: boolean; detail: string }>;
}

async function ready(): Promise<{ status: number; body: ReadyBody }> {
  const response = await fetch(`${api.url}/api/ready`);
  return { status: response.status, body: (await response.json()) as ReadyBody };
}

const scrape = (token?: string) =>
  fetch(`${api.url}/metrics`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

describe("/api/health and /api/ready", () => {
  it("answers without a credential, whatever Host a balancer sends", async () => {
    const health = await fetch(`${api.url}/api/health`, { headers: { host: "10.1.2.3:8080" } });
    expect(health.status).toBe(200);
    expect(await health.json()).toEqual({ status: "ok" });
    const { status, body } = await ready();
    expect(status).toBe(200);
    expect(body).toMatchObject({
      status: "ready",
      checks: { database: { ok: true }, migrations: { ok: true }, worker: { ok: true } },
    });
    // Only the probes: the rest still needs a credential, and a probe changes nothing.
    expect((await fetch(`${api.url}/api/ops`)).status).toBe(401);
    const post = await fetch(`${api.url}/api/ready`, {
      method: "POST",
      headers: { "content-type": "application/json" },
    });
    expect(post.status).toBe(401);
  });

  it("is not ready while the database is unreachable, and says so; health stays 200", async () => {
    // Cut until the 503 has been seen and read again, however long a busy machine takes for that.
    const restore = proxy.cutUntilRestored();
    try {
      await expect.poll(async () => (await ready()).status, { timeout: 30_000, interval: 200 }).toBe(503);
      const { body } = await ready();
      expect(body.status).toBe("not_ready");
      expect(body.checks.database.ok).toBe(false);
      expect(body.checks.migrations).toMatchObject({ ok: false, detail: expect.stringMatching(/not checked/) });
      expect((await fetch(`${api.url}/api/health`)).status).toBe(200);
    } finally {
      restore();
    }
    await expect.poll(async () => (await ready()).status, { timeout: 120_000, interval: 250 }).toBe(200);
  });

  it("names a migration the database lacks", async () => {
    const shipped = fileURLToPath(new URL("../../prisma/migrations", import.meta.url));
    const folder = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-migrations-"));
    try {
      for (const entry of await fs.readdir(shipped, { withFileTypes: true })) {
        if (entry.isDirectory()) await fs.mkdir(path.join(folder, entry.name));
      }
      await fs.mkdir(path.join(folder, "29991231235959_from_the_future"));
      const readiness = await checkReadiness(app.db.pool, { migrationsDir: folder });
      expect(readiness.ready).toBe(false);
      expect(readiness.checks.migrations).toEqual({
        ok: false,
        detail: expect.stringContaining("29991231235959_from_the_future"),
      });
      expect(readiness.checks.database.ok).toBe(true);
    } finally {
      await fs.rm(folder, { recursive: true, force: true });
    }
  });
});

describe("/metrics", () => {
  it("refuses a caller without credentials, and serves the gauges and histograms with one", async () => {
    expect((await scrape()).status).toBe(401);
    expect((await scrape("not-a-token")).status).toBe(401);
    // The agent token is not a person's: it opens the agent API only.
    expect((await scrape(AGENT_TOKEN)).status).toBe(403);
    // The metrics credential opens nothing else.
    const elsewhere = await fetch(`${api.url}/api/ops`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(elsewhere.status).toBe(401);

    // A run with one step done and one waiting at its gate.
    const caller = createCaller(createTrpcContext(app, { kind: "person", name: "tester" }));
    const plan = await caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "metrics",
        steps: [
          { id: "first", description: "runs", tool: "echo", args: { value: 1 } },
          {
            id: "gated",
            description: "waits",
            tool: "echo",
            args: { value: 2 },
            dependsOn: ["first"],
            approvalRequired: true,
          },
        ],
      }),
    });
    const { runId } = await caller.plans.approve({ planId: plan.id, version: plan.version });
    await expect
      .poll(async () => (await caller.runs.get({ runId })).steps.find((s) => s.stepId === "gated")?.status, {
        timeout: 60_000,
      })
      .toBe("awaiting_approval");

    for (const token of [ACCESS_TOKEN, METRICS_TOKEN]) {
      const response = await scrape(token);
      expect(response.status).toBe(200);
      expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
      const text = await response.text();
      expect(text).toMatch(/^stepwise_approvals_waiting 1$/m);
      expect(text).toMatch(/^stepwise_approval_oldest_wait_seconds \d/m);
      expect(text).toMatch(/^stepwise_steps\{status="awaiting_approval"\} 1$/m);
      expect(text).toMatch(/^stepwise_steps\{status="completed"\} 1$/m);
      expect(text).toMatch(/^stepwise_step_duration_seconds_count\{tool="echo",outcome="ok"\} [1-9]/m);
      // Jobs picked from the queue (a continuation of the step before never waits there).
      expect(text).toContain("# TYPE stepwise_step_queue_latency_seconds histogram");
      expect(text).toMatch(/^stepwise_webhook_deliveries\{state="failed"\} 0$/m);
      expect(text).toMatch(/^stepwise_db_pool_connections\{pool="engine",state="in_use"\} \d+$/m);
      expect(text).toMatch(/^stepwise_db_pool_max\{pool="engine"\} [1-9]/m);
      expect(text).toContain("# TYPE stepwise_jobs_waiting gauge");
      expect(text).toMatch(/^stepwise_process_resident_memory_bytes \d/m);
    }
    await caller.runs.cancel({ runId });
  });
});

describe("/api/ready without a worker", () => {
  it("fails the worker check once the only worker stopped", async () => {
    await app.worker!.stop();
    const { status, body } = await ready();
    expect(status).toBe(503);
    expect(body.checks.database.ok).toBe(true);
    expect(body.checks.worker).toMatchObject({ ok: false, detail: expect.stringMatching(/no worker/) });
  });
});
