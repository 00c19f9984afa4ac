import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { addPrincipal } from "../people/principals";
import { readPlannerConfig } from "../planner/config";
import { createPlannerDeps, installPlanner } from "../planner/deps";
import { withCaller } from "../caller-context";

/** What the admin does on the People page, under the admin's name (audit verify checks who). */
const asAdmin = <T>(work: () => T): T => withCaller({ kind: "person", name: "user" }, work);

/** Seed 001's `POST /chat` pass-through, against a scripted OpenAI-compatible provider. */
let harness: Harness | undefined;
let llm: ScriptedLlm | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;

afterEach(async () => {
  await api?.close();
  await llm?.close();
  await harness?.close();
  api = undefined;
  llm = undefined;
  harness = undefined;
});

async function start(configured = true, accessToken?: string) {
  harness = await startHarness({ worker: false });
  llm = await startScriptedLlm();
  installPlanner(
    harness.app,
    createPlannerDeps(
      harness.app,
      readPlannerConfig(
        configured
          ? { STEPWISE_LLM_BASE_URL: llm.baseUrl, STEPWISE_LLM_MODELS: "scripted-chat", STEPWISE_PLANNER_RETRIES: "0" }
          : {},
      ),
    ),
  );
  api = await startApiServer(harness.app, { agentToken: "chat-token", ...(accessToken && { accessToken }) });
  return api.url;
}

const chat = (url: string, body: unknown, bearer?: string) =>
  fetch(`${url}/api/chat`, {
    method: "POST",
    headers: { "content-type": "application/json", ...(bearer && { authorization: `Bearer ${bearer}` }) },
    body: JSON.stringify(body),
  });

describe("POST /api/chat", () => {
  it("passes messages to the provider and answers its response with a traceId that finds the call", async () => {
    const url = await start();
    llm!.script({ text: "The diff renames one function." });
    const response = await chat(url, { messages: [{ role: "user", content: "Summarize the diff." }] });
    expect(response.status).toBe(200);
    const body = await response.json();
    expect(body).toMatchObject({
      text: "The diff renames one function.",
      model: "compatible:scripted-chat",
      finishReason: "stop",
      traceId: expect.stringMatching(/^[0-9a-f-]{36}$/),
    });
    expect(llm!.requests[0]!.messages).toEqual([{ role: "user", content: "Summarize the diff." }]);
    const calls = await harness!.app.db.pool.query("select purpose, trace_id, ok from llm_calls");
    expect(calls.rows).toEqual([{ purpose: "chat", trace_id: body.traceId, ok: true }]);
  });

  it("streams the text when asked", async () => {
    const url = await start();
    llm!.script({ text: "A streamed answer, in pieces." });
    const response = await chat(url, { messages: [{ role: "user", content: "Hi" }], stream: true });
    expect(response.status).toBe(200);
    expect(response.headers.get("x-trace-id")).toMatch(/^[0-9a-f-]{36}$/);
    const chunks: string[] = [];
    const decoder = new TextDecoder();
    for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) chunks.push(decoder.decode(chunk));
    expect(chunks.join("")).toBe("A streamed answer, in pieces.");
  });

  it("is chat.complete's: an agent and a viewer are refused and reach no model; a reviewer is answered", async () => {
    // With an access token, as `serve` runs: each credential is then its own caller.
    const url = await start(true, "chat-access-token");
    const pool = harness!.app.db.pool;
    const viewer = await asAdmin(() =>
      addPrincipal(pool, { kind: "person", name: "vera", role: "viewer", createdBy: "user" }),
    );
    const namedAgent = await asAdmin(() => addPrincipal(pool, { kind: "agent", name: "chat-bot", createdBy: "user" }));
    const reviewer = await asAdmin(() =>
      addPrincipal(pool, { kind: "person", name: "rita", role: "reviewer", createdBy: "user" }),
    );
    const messages = [{ role: "user", content: "Spend the budget." }];
    for (const [who, bearer] of [
      ["the agent token", "chat-token"],
      ["a named agent", namedAgent.token],
      ["a viewer", viewer.token],
    ]) {
      for (const stream of [false, true]) {
        const refused = await chat(url, { messages, stream }, bearer);
        expect(refused.status, `${who}, stream ${stream}`).toBe(403);
        expect((await refused.json()).detail).toContain("chat.complete");
      }
    }
    expect(llm!.requests).toHaveLength(0);
    llm!.script({ text: "Answered." });
    const answered = await chat(url, { messages }, reviewer.token);
    expect(answered.status).toBe(200);
    expect(await answered.json()).toMatchObject({ text: "Answered." });
  });

  it("refuses bad input, and says what to configure without a provider", async () => {
    const url = await start(false);
    expect((await chat(url, { messages: [] })).status).toBe(400);
    expect((await chat(url, { messages: [{ role: "tool", content: "x" }] })).status).toBe(400);
    const unconfigured = await chat(url, { messages: [{ role: "user", content: "Hi" }] });
    expect(unconfigured.status).toBe(503);
    expect(await unconfigured.json()).toMatchObject({ code: "unavailable", details: { help: expect.any(Array) } });
  });
});
