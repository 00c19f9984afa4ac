import http from "node:http";
import type { AddressInfo } from "node:net";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { spawnProbeWorker, type ProbeWorkerProcess } from "../../tests/probe-worker";
import { appendEvents } from "../events/store";
import { invokeOperation } from "../operations/operation";
import { webhookCreate } from "../operations/webhooks";

/**
 * Queue jobs other than steps are recovered by the same liveness rule as steps: a worker killed
 * with SIGKILL while it holds webhook deliveries (graphile-worker has locked their jobs to it)
 * must not leave them for the queue's 4-hour lock expiry. Real worker processes, a real receiver.
 */
const NOTIFICATIONS = 10;
const CONCURRENCY = 4;

let harness: Harness;
const workers: ProbeWorkerProcess[] = [];
const saved = { timeout: process.env.STEPWISE_WEBHOOK_TIMEOUT_MS };

beforeAll(async () => {
  harness = await startHarness({ worker: false });
  // A held request must still be in flight when its worker is killed: no POST gives up first.
  process.env.STEPWISE_WEBHOOK_TIMEOUT_MS = "300000";
});
afterAll(async () => {
  await Promise.all(workers.map((worker) => worker.kill()));
  await harness?.close();
  if (saved.timeout === undefined) delete process.env.STEPWISE_WEBHOOK_TIMEOUT_MS;
  else process.env.STEPWISE_WEBHOOK_TIMEOUT_MS = saved.timeout;
});

/**
 * A receiver that holds every request open until `answer()` is called, then answers each (held or
 * new) after a short pause. It records, per delivery id (the `X-Stepwise-Delivery` header), how
 * many requests were open at once, and which deliveries were answered 2xx.
 */
async function holdingReceiver() {
  let answering = false;
  const open = new Map<string, number>();
  let mostAtOnce = 0;
  const answered = new Set<string>();
  const held: { id: string; response: http.ServerResponse }[] = [];
  const reply = (id: string, response: http.ServerResponse) =>
    setTimeout(() => {
      if (response.destroyed) return;
      answered.add(id);
      response.writeHead(200).end("ok");
    }, 300);
  const server = http.createServer((request, response) => {
    const id = String(request.headers["x-stepwise-delivery"]);
    open.set(id, (open.get(id) ?? 0) + 1);
    mostAtOnce = Math.max(mostAtOnce, open.get(id)!);
    // The sender's socket closes when its process dies; the request is then no longer open.
    response.once("close", () => open.set(id, open.get(id)! - 1));
    request.resume();
    request.on("end", () => {
      if (answering) reply(id, response);
      else held.push({ id, response });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    openNow: () => [...open.values()].reduce((sum, n) => sum + n, 0),
    mostAtOnce: () => mostAtOnce,
    answered,
    answer() {
      answering = true;
      for (const { id, response } of held.splice(0)) reply(id, response);
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe("queue jobs of a dead worker", () => {
  it(
    "a worker SIGKILLed while it sends webhooks: every delivery arrives within a minute, none twice at once",
    { timeout: 600_000 },
    async () => {
      const receiver = await holdingReceiver();
      try {
        await invokeOperation(
          webhookCreate,
          { app: harness.app, identity: { kind: "person", name: "alice" } },
          { name: "hook", url: receiver.url, events: ["waiting_for_you"] },
        );
        const probe = {
          databaseUrl: harness.databaseUrl,
          probeLog: path.join(harness.workspace, "probe.log"),
          workspace: harness.workspace,
          concurrency: CONCURRENCY,
        };
        const doomed = spawnProbeWorker(probe);
        workers.push(doomed);
        await doomed.ready;

        // Ten notifications, each its own event stream and so its own fanout job and delivery.
        for (let i = 0; i < NOTIFICATIONS; i++) {
          const sessionId = crypto.randomUUID();
          await harness.app.db.pool.query(
            `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor, plan_id)
             values ($1, 'external', 'quick', 'completed', $2, 'agent', $3, 'trace', 'agent-1', 'plan-x')`,
            [sessionId, `Goal ${i}`, harness.workspace],
          );
          const client = await harness.app.db.pool.connect();
          try {
            await client.query("begin");
            await appendEvents(client, { streamId: sessionId, planId: sessionId, runId: null, traceId: "trace" }, [
              { type: "planning.completed", data: { planId: "plan-x", version: 1 } },
            ]);
            await client.query("commit");
          } finally {
            client.release();
          }
        }
        // Every slot of the doomed worker holds a delivery, its job locked to that process.
        await expect.poll(receiver.openNow, { timeout: 300_000 }).toBe(CONCURRENCY);
        const locked = await harness.app.db.pool.query<{ n: number }>(
          "select count(*)::int as n from graphile_worker.jobs where task_identifier = 'webhook_deliver' and locked_at is not null",
        );
        expect(locked.rows[0]!.n).toBe(CONCURRENCY);

        // A peer, ready before the kill, takes what is free; the held deliveries wait for recovery.
        const peer = spawnProbeWorker(probe);
        workers.push(peer);
        await peer.ready;
        await doomed.kill();
        receiver.answer();

        await expect
          .poll(
            async () =>
              (
                await harness.app.db.pool.query<{ id: string; status: string }>(
                  "select id, status from webhook_deliveries where status <> 'succeeded'",
                )
              ).rows,
            { timeout: 60_000, interval: 250 },
          )
          .toEqual([]);
        const all = await harness.app.db.pool.query<{ id: string }>("select id from webhook_deliveries");
        expect(all.rowCount).toBe(NOTIFICATIONS);
        for (const { id } of all.rows) {
          expect(receiver.answered.has(id), `delivery ${id} answered`).toBe(true);
        }
        expect(receiver.mostAtOnce()).toBe(1);
        // Each delivery logged one attempt: the killed worker's attempt left no trace, the retry one.
        const attempts = await harness.app.db.pool.query<{ n: number }>(
          "select count(*)::int as n from webhook_delivery_attempts",
        );
        expect(attempts.rows[0]!.n).toBe(NOTIFICATIONS);
        // The dead worker's runner id was on record beside its heartbeat row.
        const recorded = await harness.app.db.pool.query<{ n: number }>(
          "select cardinality(queue_worker_ids)::int as n from workers where pid = $1",
          [doomed.pid],
        );
        expect(recorded.rows[0]!.n).toBeGreaterThan(0);
      } finally {
        await receiver.close();
      }
    },
  );
});
