import fs from "node:fs/promises";
import http from "node:http";
import type { AddressInfo } from "node:net";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { isAppError } from "../errors";
import { appendEvents } from "../events/store";
import { decisionLinkDecide } from "../operations/decision-links";
import type { Identity } from "../identity";
import { addPrincipal, setRole } from "../people/principals";
import { invokeOperation } from "../operations/operation";
import { planApprove, planCreate } from "../operations/plans";
import { runCancel } from "../operations/runs";
import {
  webhookCreate,
  webhookDeliveries,
  webhookList,
  webhookRedeliver,
  webhookTest,
  webhookUpdate,
} from "../operations/webhooks";
import { verifyWebhook } from "./format";
import { withCaller } from "../caller-context";

/** What the admin does on the People page, under the admin's name (audit verify checks who). */
const asAdmin = <T>(work: () => T): T => withCaller({ kind: "person", name: "user" }, work);

/**
 * Outgoing webhooks end to end: the real queue, a real receiver (an HTTP server started here), and
 * the engine emitting the events. The receiver checks signatures the way a real one would.
 */
/** An admin principal (added in beforeAll): links a webhook mints are made as her, judged by her role now. */
const PERSON: Identity = { kind: "person", name: "alice" };
let alice: { principalId: string };
let harness: Harness;
let dataDir: string;
const saved = {
  data: process.env.STEPWISE_DATA_DIR,
  backoff: process.env.STEPWISE_WEBHOOK_BACKOFF_MS,
  publicUrl: process.env.STEPWISE_PUBLIC_URL,
};

interface Received {
  headers: http.IncomingHttpHeaders;
  raw: string;
  body: Record<string, unknown>;
}

/** A receiver answering each request with what `answer` says for the n-th request (0-based). */
async function startReceiver(answer: (n: number) => { status: number; body?: string }) {
  const received: Received[] = [];
  const server = http.createServer((request, response) => {
    let raw = "";
    request.setEncoding("utf8");
    request.on("data", (chunk: string) => (raw += chunk));
    request.on("end", () => {
      const n = received.length;
      received.push({ headers: request.headers, raw, body: JSON.parse(raw) as Record<string, unknown> });
      const { status, body } = answer(n);
      response.writeHead(status, { "content-type": "text/plain" }).end(body ?? "");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/hook`,
    received,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
const receivers: { close(): Promise<void> }[] = [];
async function receiver(answer: (n: number) => { status: number; body?: string }) {
  const started = await startReceiver(answer);
  receivers.push(started);
  return started;
}

const ctx = () => ({ app: harness.app, identity: PERSON });

async function endpoint(url: string, extra: Record<string, unknown> = {}) {
  return invokeOperation(webhookCreate, ctx(), { name: "hook", url, events: ["waiting_for_you"], ...extra });
}

async function deliveriesOf(id: string) {
  return (await invokeOperation(webhookDeliveries, ctx(), { id })).deliveries;
}

function signed(secret: string, request: Received): boolean {
  return verifyWebhook(
    secret,
    {
      signature: request.headers["x-stepwise-signature"] as string | undefined,
      timestamp: request.headers["x-stepwise-timestamp"] as string | undefined,
    },
    request.raw,
  );
}

beforeAll(async () => {
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-webhooks-"));
  process.env.STEPWISE_DATA_DIR = dataDir;
  // Retries after 50, 100, 200, 400 ms: the schedule's shape, at a test's pace.
  process.env.STEPWISE_WEBHOOK_BACKOFF_MS = "50";
  process.env.STEPWISE_PUBLIC_URL = "https://stepwise.example";
  harness = await startHarness();
  alice = await asAdmin(() =>
    addPrincipal(harness.app.db.pool, { kind: "person", name: "alice", role: "admin", createdBy: "user" }),
  );
});
afterEach(async () => {
  await Promise.all(receivers.splice(0).map((r) => r.close()));
  await harness.app.db.pool.query("delete from webhook_endpoints");
});
afterAll(async () => {
  await harness.close();
  for (const [name, value] of [
    ["STEPWISE_DATA_DIR", saved.data],
    ["STEPWISE_WEBHOOK_BACKOFF_MS", saved.backoff],
    ["STEPWISE_PUBLIC_URL", saved.publicUrl],
  ] as const) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
  await fs.rm(dataDir, { recursive: true, force: true });
});

describe("outgoing webhooks", () => {
  it("signs each request with the secret over the timestamp and raw body; the secret is shown once only", async () => {
    const hook = await receiver(() => ({ status: 204 }));
    const created = await endpoint(hook.url);
    expect(created.secret).toMatch(/^whsec_/);
    const { deliveryId } = await invokeOperation(webhookTest, ctx(), { id: created.webhook.id });
    await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(1);
    const request = hook.received[0]!;
    expect(request.headers["x-stepwise-signature"]).toMatch(/^sha256=[0-9a-f]{64}$/);
    expect(signed(created.secret, request)).toBe(true);
    expect(signed("another-secret-of-enough-length", request)).toBe(false);
    // Replay protection: the same signed body presented long after its timestamp is refused.
    const stale = Number(request.headers["x-stepwise-timestamp"]) + 3600;
    expect(
      verifyWebhook(
        created.secret,
        {
          signature: request.headers["x-stepwise-signature"] as string,
          timestamp: request.headers["x-stepwise-timestamp"] as string,
        },
        request.raw,
        { now: stale },
      ),
    ).toBe(false);
    expect(request.body).toMatchObject({ id: deliveryId, event: "webhook.test" });
    expect(request.headers["x-stepwise-delivery"]).toBe(deliveryId);

    await expect
      .poll(async () => (await deliveriesOf(created.webhook.id))[0]?.status, { timeout: 30_000 })
      .toBe("succeeded");
    const [delivery] = await deliveriesOf(created.webhook.id);
    expect(delivery!.attemptLog).toEqual([
      expect.objectContaining({ attempt: 1, statusCode: 204, error: null, nextRetryAt: null }),
    ]);

    // Never again: not in the list, nor in the audit entry of its creation.
    const listed = await invokeOperation(webhookList, ctx(), {});
    expect(JSON.stringify(listed)).not.toContain(created.secret);
    expect(listed.webhooks[0]).not.toHaveProperty("secret");
    const audit = await harness.app.db.pool.query<{ detail: unknown }>(
      "select detail from audit_entries where action = 'webhook.created'",
    );
    expect(audit.rows).toHaveLength(1);
    expect(JSON.stringify(audit.rows[0]!.detail)).not.toContain(created.secret);

    // A new secret is shown once too, and signs from then on.
    const rotated = await invokeOperation(webhookUpdate, ctx(), { id: created.webhook.id, rotateSecret: true });
    expect(rotated.secret).toMatch(/^whsec_/);
    expect(rotated.secret).not.toBe(created.secret);
    await invokeOperation(webhookTest, ctx(), { id: created.webhook.id });
    await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(2);
    expect(signed(rotated.secret!, hook.received[1]!)).toBe(true);
    expect(signed(created.secret, hook.received[1]!)).toBe(false);
  });

  it("retries with backoff: a receiver that fails twice then succeeds gets three attempts, all logged", async () => {
    const hook = await receiver((n) => (n < 2 ? { status: 500, body: "not yet" } : { status: 200 }));
    const created = await endpoint(hook.url);
    await invokeOperation(webhookTest, ctx(), { id: created.webhook.id });
    await expect
      .poll(async () => (await deliveriesOf(created.webhook.id))[0]?.status, { timeout: 30_000 })
      .toBe("succeeded");
    const [delivery] = await deliveriesOf(created.webhook.id);
    expect(delivery!.attempts).toBe(3);
    expect(delivery!.attemptLog.map((attempt) => attempt.statusCode)).toEqual([500, 500, 200]);
    expect(delivery!.attemptLog[0]!.error).toContain("500");
    expect(delivery!.attemptLog[0]!.error).toContain("not yet");
    expect(delivery!.attemptLog[0]!.nextRetryAt).not.toBeNull();
    expect(delivery!.attemptLog[1]!.nextRetryAt).not.toBeNull();
    expect(delivery!.attemptLog[2]).toMatchObject({ error: null, nextRetryAt: null });
    // Backoff: the second wait is longer than the first.
    const waits = delivery!.attemptLog
      .slice(0, 2)
      .map((attempt) => Date.parse(attempt.nextRetryAt!) - Date.parse(attempt.at));
    expect(waits[1]!).toBeGreaterThan(waits[0]!);
    // Every attempt is the same delivery, signed afresh.
    expect(new Set(hook.received.map((request) => request.body.id)).size).toBe(1);
    expect(hook.received.every((request) => signed(created.secret, request))).toBe(true);
  });

  it("a receiver that always fails leaves the delivery failed after five attempts, each with its error; retry sends it again", async () => {
    let healthy = false;
    const hook = await receiver(() => (healthy ? { status: 200 } : { status: 503, body: "down for maintenance" }));
    const created = await endpoint(hook.url);
    await invokeOperation(webhookTest, ctx(), { id: created.webhook.id });
    await expect
      .poll(async () => (await deliveriesOf(created.webhook.id))[0]?.status, { timeout: 60_000 })
      .toBe("failed");
    const [delivery] = await deliveriesOf(created.webhook.id);
    expect(delivery!.attemptLog).toHaveLength(5);
    for (const attempt of delivery!.attemptLog) {
      expect(attempt.statusCode).toBe(503);
      expect(attempt.error).toContain("down for maintenance");
    }
    expect(delivery!.attemptLog[4]!.nextRetryAt).toBeNull();
    expect(delivery!.nextAttemptAt).toBeNull();

    // Unreachable: the error says so.
    const closed = await startReceiver(() => ({ status: 200 }));
    await closed.close();
    const gone = await endpoint(closed.url);
    await invokeOperation(webhookTest, ctx(), { id: gone.webhook.id });
    await expect
      .poll(async () => (await deliveriesOf(gone.webhook.id))[0]?.attemptLog.length ?? 0, { timeout: 30_000 })
      .toBeGreaterThan(0);
    expect((await deliveriesOf(gone.webhook.id))[0]!.attemptLog[0]!.error).toMatch(
      /Could not reach the receiver: ECONNREFUSED/,
    );

    // The person's retry: the same delivery, attempt 6, succeeding now.
    healthy = true;
    const again = await invokeOperation(webhookRedeliver, ctx(), { deliveryId: delivery!.id });
    expect(again.attempt).toBe(6);
    await expect
      .poll(async () => (await deliveriesOf(created.webhook.id))[0]?.status, { timeout: 30_000 })
      .toBe("succeeded");
    expect((await deliveriesOf(created.webhook.id))[0]!.attemptLog.at(-1)).toMatchObject({
      attempt: 6,
      statusCode: 200,
    });
  });

  it("tells 'waiting for you' when a gated step waits, with a decision link that decides; then 'run finished'", async () => {
    const hook = await receiver(() => ({ status: 200 }));
    const created = await endpoint(hook.url, {
      events: ["waiting_for_you", "run.finished"],
      includeDecisionLinks: true,
    });
    const plan = await invokeOperation(planCreate, ctx(), {
      draft: {
        goal: "webhook gate",
        steps: [
          { id: "write", description: "write a file", tool: "shell", args: { command: "echo hooked > hooked.txt" } },
        ],
      },
    });
    const { runId } = await invokeOperation(planApprove, ctx(), { planId: plan.id, version: plan.version });
    await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(1);
    const waiting = hook.received[0]!;
    expect(signed(created.secret, waiting)).toBe(true);
    expect(waiting.body).toMatchObject({
      event: "waiting_for_you",
      data: { kind: "step_approval", runId, stepId: "write", goal: "webhook gate" },
    });
    const data = waiting.body.data as { decisionLink: string };
    expect(data.decisionLink).toMatch(/^https:\/\/stepwise\.example\/decide\/[0-9a-f-]{36}\./);
    expect(waiting.body.links).toContainEqual({
      label: "Open the run",
      url: `https://stepwise.example/runs/${runId}#step-write`,
    });

    // The link decides as the endpoint's maker.
    const token = data.decisionLink.split("/decide/")[1]!;
    const decided = await invokeOperation(
      decisionLinkDecide,
      { app: harness.app, identity: { kind: "person", name: "decision link holder" } },
      { token, decision: "approve" },
    );
    expect(decided.decidedAs).toBe("alice");
    await harness.waitForRun(runId);
    await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(2);
    expect(hook.received[1]!.body).toMatchObject({ event: "run.finished", data: { runId, status: "completed" } });
  });

  it("mints no decision link for a maker demoted below approver since setting the endpoint up", async () => {
    const hook = await receiver(() => ({ status: 200 }));
    await endpoint(hook.url, { events: ["waiting_for_you"], includeDecisionLinks: true });
    await asAdmin(() => setRole(harness.app.db.pool, alice.principalId, "reviewer", "user"));
    try {
      const plan = await invokeOperation(planCreate, ctx(), {
        draft: {
          goal: "webhook gate, demoted maker",
          steps: [
            { id: "write", description: "write a file", tool: "shell", args: { command: "echo x > demoted.txt" } },
          ],
        },
      });
      const { runId } = await invokeOperation(planApprove, ctx(), { planId: plan.id, version: plan.version });
      await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(1);
      // The message still says the step waits, but carries no link in the demoted person's name.
      expect(hook.received[0]!.body).toMatchObject({ event: "waiting_for_you", data: { runId, stepId: "write" } });
      expect((hook.received[0]!.body.data as Record<string, unknown>).decisionLink).toBeUndefined();
      expect(JSON.stringify(hook.received[0]!.body)).not.toContain("/decide/");
      const links = await harness.app.db.pool.query("select 1 from decision_links where run_id = $1", [runId]);
      expect(links.rowCount).toBe(0);
      await invokeOperation(runCancel, ctx(), { runId });
    } finally {
      await asAdmin(() => setRole(harness.app.db.pool, alice.principalId, "admin", "user"));
    }
  });

  it("tells 'plan submitted' and 'waiting for you' when an agent's plan mode hands in a plan, through the events' own transaction", async () => {
    const hook = await receiver(() => ({ status: 200 }));
    await endpoint(hook.url, { events: ["plan.submitted", "waiting_for_you"] });
    const sessionId = crypto.randomUUID();
    // What plan mode's submit_plan leaves: a completed external session and its planning.completed event.
    await harness.app.db.pool.query(
      `insert into planning_sessions (id, kind, mode, status, goal, model, workspace_root, trace_id, actor, plan_id)
       values ($1, 'external', 'quick', 'completed', 'Tidy the repository', 'agent', $2, 'trace', 'agent-1', 'plan-x')`,
      [sessionId, harness.workspace],
    );
    const client = await harness.app.db.pool.connect();
    try {
      await client.query("begin");
      await appendEvents(client, { streamId: sessionId, planId: sessionId, runId: null, traceId: "trace" }, [
        { type: "planning.completed", data: { planId: "plan-x", version: 1 } },
      ]);
      // Rolled back: no event, and so no job and no message.
      await client.query("rollback");
      await client.query("begin");
      await appendEvents(client, { streamId: sessionId, planId: sessionId, runId: null, traceId: "trace" }, [
        { type: "planning.completed", data: { planId: "plan-x", version: 1 } },
      ]);
      await client.query("commit");
    } finally {
      client.release();
    }
    await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(2);
    const events = hook.received.map((request) => request.body.event).sort();
    expect(events).toEqual(["plan.submitted", "waiting_for_you"]);
    for (const request of hook.received) {
      expect(request.body).toMatchObject({
        data: { kind: "plan_review", planId: "plan-x", version: 1, sessionId, goal: "Tidy the repository" },
        links: [{ label: "Review the plan", url: "https://stepwise.example/plans/plan-x" }],
      });
    }
  });

  it("shapes a Slack message as {text, blocks} with the summary and links", async () => {
    const hook = await receiver(() => ({ status: 200 }));
    const created = await endpoint(hook.url, { format: "slack" });
    await invokeOperation(webhookTest, ctx(), { id: created.webhook.id });
    await expect.poll(() => hook.received.length, { timeout: 30_000 }).toBe(1);
    const body = hook.received[0]!.body as { text: unknown; blocks: { type: string; elements?: { url?: string }[] }[] };
    expect(Object.keys(body).sort()).toEqual(["blocks", "text"]);
    expect(body.text).toContain("Test message from Stepwise");
    expect(body.blocks[0]).toMatchObject({ type: "section", text: { type: "mrkdwn" } });
    const actions = body.blocks.find((block) => block.type === "actions");
    expect(actions?.elements?.[0]?.url).toBe("https://stepwise.example/settings/webhooks");
    expect(signed(created.secret, hook.received[0]!)).toBe(true);
  });

  it("refuses URLs that are not http(s), and changes nothing", async () => {
    for (const url of [
      "ftp://example.com/hook",
      "file:///etc/passwd",
      "javascript:alert(1)",
      "not a url",
      "http://user:pw@example.com/",
    ]) {
      const error = await invokeOperation(webhookCreate, ctx(), { name: "bad", url, events: ["run.failed"] }).catch(
        (caught: unknown) => caught,
      );
      expect(isAppError(error) && error.code, url).toBe("invalid_input");
    }
    expect((await invokeOperation(webhookList, ctx(), {})).webhooks).toEqual([]);
  });
});
