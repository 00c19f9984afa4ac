import { createTRPCClient, createWSClient, wsLink } from "@trpc/client";
import superjson from "superjson";
import { afterEach, describe, expect, it } from "vitest";
import WebSocket from "ws";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { readEvents } from "../events/store";
import { invokeOperation } from "../operations/operation";
import { peopleAdd, peopleRevokeCredential } from "../operations/people";
import type { AppRouter } from "../trpc/root";

/**
 * The browser's live socket on a real HTTP server behind the real door: who may open it, that it
 * streams a run's events with resumption, and that it carries subscriptions only.
 */
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;

afterEach(async () => {
  await api?.close();
  await harness?.close();
  api = harness = undefined;
});

async function start(accessToken?: string) {
  harness = await startHarness();
  api = await startApiServer(harness.app, { agentToken: "live-agent-token", ...(accessToken && { accessToken }) });
  return { url: api.url.replace("http:", "ws:") + "/api/live", origin: api.url };
}

/** Opens a socket and reports the handshake's outcome: open, or the refusal's status and body. */
function handshake(url: string, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, { headers });
    socket.on("open", () => {
      socket.close();
      resolve({ status: 101, body: "" });
    });
    socket.on("unexpected-response", (_request, response) => {
      let body = "";
      response.on("data", (chunk: Buffer) => (body += chunk.toString()));
      response.on("end", () => resolve({ status: response.statusCode ?? 0, body }));
    });
    socket.on("error", (error) => {
      if (!String(error.message).includes("Unexpected server response")) reject(error);
    });
  });
}

async function gatedRun(h: Harness) {
  const plan = await h.caller.plans.createFromJson({
    planJson: JSON.stringify({
      goal: "live",
      steps: [
        { id: "step_1", description: "first", tool: "echo", args: { value: 1 } },
        {
          id: "step_2",
          description: "gate",
          tool: "echo",
          args: { value: 2 },
          dependsOn: ["step_1"],
          approvalRequired: true,
        },
      ],
    }),
  });
  const { runId } = await h.caller.plans.approve({ planId: plan.id, version: 1 });
  for (let tries = 0; tries < 400; tries++) {
    const events = await readEvents(h.app.db.pool, runId, 0);
    if (events.some((event) => event.type === "approval.requested")) return runId;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error("The gate never asked for approval");
}

describe("the live socket", () => {
  it("refuses handshakes from other origins, hosts and agent tokens, and accepts the app's own pages", async () => {
    const { url, origin } = await start();
    expect(await handshake(url, { origin })).toMatchObject({ status: 101 });
    const foreign = await handshake(url, { origin: "https://attacker.test" });
    expect(foreign.status).toBe(403);
    expect(JSON.parse(foreign.body)).toMatchObject({ title: "Origin not allowed" });
    expect((await handshake(url, { origin: "http://attacker.test", host: "attacker.test" })).status).toBe(403);
    // The agent token opens the agent API, not the browser's live view.
    expect((await handshake(url, { authorization: "Bearer live-agent-token" })).status).toBe(403);
  });

  it("streams a run's events and resumes after the last one it was given", async () => {
    const { url } = await start();
    const runId = await gatedRun(harness!);
    const client = createWSClient({ url, WebSocket: WebSocket as unknown as typeof globalThis.WebSocket });
    const trpc = createTRPCClient<AppRouter>({ links: [wsLink({ client, transformer: superjson })] });
    const follow = (lastEventId: string | null, until: (seq: number) => boolean) =>
      new Promise<number[]>((resolve, reject) => {
        const seqs: number[] = [];
        const subscription = trpc.runs.events.subscribe(
          { runId, lastEventId },
          {
            onData: ({ data }) => {
              seqs.push(data.seq);
              if (until(data.seq)) {
                subscription.unsubscribe();
                resolve(seqs);
              }
            },
            onError: reject,
          },
        );
      });
    try {
      const stored = await harness!.caller.runs.get({ runId });
      const all = await follow(null, (seq) => seq === stored.lastSeq);
      expect(all).toEqual(Array.from({ length: stored.lastSeq }, (_, i) => i + 1));
      // From event 2 on: nothing before it again, and what happens next arrives live.
      const resumed = follow("2", (seq) => seq > stored.lastSeq && seq >= stored.lastSeq + 2);
      await harness!.caller.runs.decide({ runId, stepId: "step_2", approve: true });
      const seqs = await resumed;
      expect(seqs[0]).toBe(3);
      expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, i) => i + 3));
    } finally {
      client.close();
    }
  });

  it("closes the socket of a credential revoked after it opened, at the next delivery", async () => {
    const { url, origin } = await start("live-access-token");
    const runId = await gatedRun(harness!);
    // Through the operations, as the admin does it on the People page: the audit then says who.
    const admin = { app: harness!.app, identity: { kind: "person" as const, name: "user" } };
    const vic = (await invokeOperation(peopleAdd, admin, { kind: "person", name: "vic", role: "viewer" })) as {
      credentialId: string;
      token: string;
    };
    // The browser's WebSocket sends the cookie; this one sends vic's own credential.
    class VicsSocket extends WebSocket {
      constructor(address: string | URL, protocols?: string | string[]) {
        super(address, protocols, { headers: { origin, authorization: `Bearer ${vic.token}` } });
      }
    }
    let closedWith: number | undefined;
    const client = createWSClient({
      url,
      WebSocket: VicsSocket as unknown as typeof globalThis.WebSocket,
      retryDelayMs: () => 60_000,
      onClose: (cause) => (closedWith ??= cause?.code),
    });
    const trpc = createTRPCClient<AppRouter>({ links: [wsLink({ client, transformer: superjson })] });
    const seqs: number[] = [];
    const subscription = trpc.runs.events.subscribe(
      { runId, lastEventId: null },
      { onData: ({ data }) => void seqs.push(data.seq), onError: () => undefined },
    );
    try {
      const stored = await harness!.caller.runs.get({ runId });
      await expect.poll(() => seqs.at(-1)).toBe(stored.lastSeq);
      await invokeOperation(peopleRevokeCredential, admin, { credentialId: vic.credentialId });
      // The run goes on: those events are the next deliveries, and they close the socket instead.
      await harness!.caller.runs.decide({ runId, stepId: "step_2", approve: true });
      await harness!.waitForRun(runId, ["completed"]);
      await expect.poll(() => closedWith).toBe(4401);
      expect(seqs.at(-1)).toBe(stored.lastSeq);
      expect((await harness!.caller.runs.get({ runId })).lastSeq).toBeGreaterThan(stored.lastSeq);
    } finally {
      subscription.unsubscribe();
      client.close();
    }
  });

  it("carries subscriptions only: a mutation sent over the socket is not found and changes nothing", async () => {
    const { url, origin } = await start();
    const runId = await gatedRun(harness!);
    const socket = new WebSocket(url, { headers: { origin } });
    await new Promise((resolve) => socket.on("open", resolve));
    const reply = new Promise<{ error?: { json?: { data?: { code?: string } } } }>((resolve) =>
      socket.on("message", (data) => {
        const text = data.toString();
        if (text !== "PING") resolve(JSON.parse(text));
      }),
    );
    socket.send(
      JSON.stringify({ id: 1, method: "mutation", params: { path: "runs.cancel", input: { json: { runId } } } }),
    );
    // superjson's envelope: the error's fields are under `json`.
    expect((await reply).error?.json?.data?.code).toBe("NOT_FOUND");
    socket.close();
    expect((await harness!.caller.runs.get({ runId })).status).toBe("running");
  });
});
