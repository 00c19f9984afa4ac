import fs from "node:fs/promises";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { MAX_SESSIONS_PER_CREDENTIAL } from "./http";
import { addPrincipal, revokeCredential, setRole } from "../people/principals";
import { readyForTaskSchema, sessionCreatedSchema, syncInstructionsSchema } from "../agents/contract";
import { todoPlanSchema } from "../agents/todo-plans";
import { SNAKE_CASE } from "./naming";
import { withCaller } from "../caller-context";
import { AUTHORITY_RULES, createAuthority, type Authority } from "../policy/authority";

/** What the admin does on the People page, under the admin's name (audit verify checks who). */
const asAdmin = <T>(work: () => T): T => withCaller({ kind: "person", name: "user" }, work);

/**
 * The MCP server driven by the SDK's own client, over Streamable HTTP behind the door and over
 * stdio through `stepwise mcp` (a subprocess), on a real database.
 */
const AGENT_TOKEN = "mcp-test-agent-token";
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
const clients: Client[] = [];

afterEach(async () => {
  for (const client of clients.splice(0)) await client.close().catch(() => undefined);
  await api?.close();
  await harness?.close();
  api = undefined;
  harness = undefined;
});

async function start(options: { accessToken?: string; authority?: Authority } = {}) {
  const { authority, ...door } = options;
  harness = await startHarness(authority ? { authority } : {});
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN, ...door });
  return api.url;
}

async function httpClient(url: string, token = AGENT_TOKEN, headers: Record<string, string> = {}) {
  const client = new Client({ name: "stepwise-test", version: "1.0.0" });
  const transport = new StreamableHTTPClientTransport(new URL("/api/mcp", url), {
    requestInit: { headers: { authorization: `Bearer ${token}`, "x-stepwise-agent": "mcp-agent", ...headers } },
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

async function stdioClient(url: string) {
  const client = new Client({ name: "stepwise-stdio-test", version: "1.0.0" });
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [path.resolve("bin/stepwise.mjs"), "mcp", "--server", url, "--token", AGENT_TOKEN, "--agent", "stdio-agent"],
    stderr: "pipe",
  });
  await client.connect(transport);
  clients.push(client);
  return client;
}

type CallResult = Awaited<ReturnType<Client["callTool"]>>;

function structured<T>(result: CallResult, schema: { parse(value: unknown): T }): T {
  expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
  return schema.parse(result.structuredContent ?? JSON.parse((result.content as { text: string }[])[0]!.text));
}

function problem(result: CallResult): { code: string; detail: string } {
  expect(result.isError).toBe(true);
  return JSON.parse((result.content as { text: string }[])[0]!.text);
}

describe("MCP server", () => {
  it("lists the agent tools with schemas and honest annotations, and never a person's decision", async () => {
    const client = await httpClient(await start());
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    for (const name of [
      "planning_setup_plan",
      "planning_add_step",
      "planning_update_step",
      "planning_read_plan",
      "start",
      "status",
      "update",
      "alert",
      "suggest",
      "plan_create",
      "plan_get",
      "run_get",
      "run_events",
      "workspace_list",
      "audit_list",
    ]) {
      expect(byName.has(name), name).toBe(true);
    }
    for (const personOnly of [
      "plan_approve",
      "run_decide",
      "run_answer",
      "run_retry_step",
      "run_skip_step",
      "workspace_register",
      "workspace_rename",
      "workspace_remove",
    ]) {
      expect(byName.has(personOnly), personOnly).toBe(false);
    }
    expect(byName.get("planning_read_plan")!.annotations).toMatchObject({ readOnlyHint: true, idempotentHint: true });
    expect(byName.get("planning_setup_plan")!.annotations).toMatchObject({
      readOnlyHint: false,
      destructiveHint: true,
    });
    expect(byName.get("run_get")!.annotations).toMatchObject({ readOnlyHint: true });
    expect(byName.get("planning_update_step")!.inputSchema.properties).toHaveProperty("status");
    expect(byName.get("planning_read_plan")!.outputSchema).toBeDefined();
  });

  it("speaks one convention: every parameter and answer field is snake_case, and unknown parameters are refused with the accepted names", async () => {
    const client = await httpClient(await start());
    const { tools } = await client.listTools();
    expect(tools.length).toBeGreaterThan(30);
    // Every property name at every depth of every tool's input and output schema.
    const propertyNames = (schema: unknown, at: string, found: string[] = []): string[] => {
      if (Array.isArray(schema)) schema.forEach((item, index) => propertyNames(item, `${at}[${index}]`, found));
      else if (schema !== null && typeof schema === "object") {
        for (const [key, value] of Object.entries(schema)) {
          if (key === "properties" && value && typeof value === "object") {
            for (const name of Object.keys(value)) found.push(`${at}.${name}`);
          }
          propertyNames(value, key === "properties" ? at : `${at}.${key}`, found);
        }
      }
      return found;
    };
    const names = tools.flatMap((tool) => [
      ...propertyNames(tool.inputSchema, `${tool.name} input`),
      ...propertyNames(tool.outputSchema ?? {}, `${tool.name} output`),
    ]);
    expect(names.length).toBeGreaterThan(100);
    expect(names.filter((name) => !SNAKE_CASE.test(name.split(".").at(-1)!))).toEqual([]);
    for (const tool of tools) expect(tool.inputSchema.additionalProperties, tool.name).toBe(false);

    // The parameter plan_review_status used to drop silently, and one of a checked tool.
    const refused = await client.callTool({
      name: "plan_review_status",
      arguments: { plan_id: "plan-00000000", waitSeconds: 5 },
    });
    expect(refused.isError).toBe(true);
    const text = (refused.content as { text: string }[])[0]!.text;
    expect(text).toContain("Unknown parameter 'waitSeconds'");
    expect(text).toContain("accepted: plan_id, version, wait_seconds");
    const askUser = await client.callTool({ name: "ask_user", arguments: { question: "Which?", waitSeconds: 1 } });
    expect((askUser.content as { text: string }[])[0]!.text).toContain(
      "Unknown parameter 'waitSeconds'; accepted: question, wait_seconds, planning_session_id",
    );

    // Answers are snake_case at every depth; a tool's own arguments stay as they were written.
    const created = await client.callTool({
      name: "plan_create",
      arguments: {
        draft: {
          goal: "Say hello",
          steps: [
            { id: "a", title: "Say hello", tool: "echo", args: { value: "hi" }, depends_on: [] },
            {
              id: "b",
              title: "Say it again",
              tool: "echo",
              args: { value: "$a" },
              depends_on: ["a"],
            },
          ],
        },
      },
    });
    expect(created.isError, JSON.stringify(created.content)).toBeFalsy();
    const plan = created.structuredContent as { steps: Record<string, unknown>[] };
    expect(plan.steps[1]).toMatchObject({ depends_on: ["a"], approval_required: false, args: { value: "$a" } });
    const answerKeys = propertyNames({ properties: plan }, "answer");
    expect(JSON.stringify(plan)).not.toMatch(/"[a-z]+[A-Z][A-Za-z]*":/);
    expect(answerKeys.length).toBeGreaterThan(3);
  });

  it("seed 000: setup, continuous ids across adds, updates, auto-completion, and every validation error", async () => {
    const client = await httpClient(await start());
    const call = (name: string, args: Record<string, unknown> = {}) => client.callTool({ name, arguments: args });

    // Nothing works before a plan exists.
    expect(problem(await call("planning_read_plan")).detail).toContain("planning_setup_plan");
    expect(problem(await call("planning_add_step", { steps: ["x"] })).code).toBe("not_found");
    expect(problem(await call("planning_update_step", { step_id: 1, status: "done" })).code).toBe("not_found");

    const plan = structured(
      await call("planning_setup_plan", { objective: "Ship it", initial_steps: ["Write", "Test"] }),
      todoPlanSchema,
    );
    expect(plan).toMatchObject({
      objective: "Ship it",
      status: "active",
      steps: [
        { step_id: 1, title: "Write", status: "pending" },
        { step_id: 2, title: "Test", status: "pending" },
      ],
    });
    const added = structured(await call("planning_add_step", { steps: ["Release"] }), todoPlanSchema);
    expect(added.steps.map((step) => step.step_id)).toEqual([1, 2, 3]);

    const long = "L".repeat(500);
    const updated = structured(
      await call("planning_update_step", { step_id: 1, status: "in_progress", title: long }),
      todoPlanSchema,
    );
    expect(updated.steps[0]).toEqual({ step_id: 1, title: long, status: "in_progress" });

    // Validation: non-empty and ≤ 500-character titles; one of title or status; known steps.
    expect(problem(await call("planning_add_step", { steps: [""] })).detail).toContain("non-empty");
    expect(problem(await call("planning_add_step", { steps: ["x".repeat(501)] })).detail).toContain("500");
    expect(problem(await call("planning_update_step", { step_id: 2 })).detail).toContain(
      "at least one of title or status",
    );
    expect(problem(await call("planning_update_step", { step_id: 9, status: "done" })).code).toBe("not_found");
    expect(problem(await call("planning_setup_plan", { objective: " " })).code).toBe("invalid_input");

    for (const id of [1, 2, 3]) await call("planning_update_step", { step_id: id, status: "done" });
    const done = structured(await call("planning_read_plan"), todoPlanSchema);
    expect(done.status).toBe("completed");
    expect(problem(await call("planning_add_step", { steps: ["more"] })).detail).toContain("completed");

    // The plan is a real run people watch: three completed agent tasks.
    const run = await harness!.caller.runs.get({ runId: done.run_id });
    expect(run.status).toBe("completed");
    expect(run.steps.map((step) => step.status)).toEqual(["completed", "completed", "completed"]);

    // Replacing the plan starts ids at 1 again; a removed id is never reused within a plan.
    const replaced = structured(
      await call("planning_setup_plan", { objective: "Second", initial_steps: ["A"] }),
      todoPlanSchema,
    );
    expect(replaced.steps).toEqual([{ step_id: 1, title: "A", status: "pending" }]);
    expect(replaced.plan_id).not.toBe(done.plan_id);
  });

  it("keeps one plan per MCP session (or per session_id the client passes)", async () => {
    const url = await start();
    const first = await httpClient(url);
    const second = await httpClient(url);
    await first.callTool({ name: "planning_setup_plan", arguments: { objective: "First's" } });
    expect(problem(await second.callTool({ name: "planning_read_plan", arguments: {} })).code).toBe("not_found");
    await second.callTool({ name: "planning_setup_plan", arguments: { objective: "Shared", session_id: "team" } });
    const shared = structured(
      await first.callTool({ name: "planning_read_plan", arguments: { session_id: "team" } }),
      todoPlanSchema,
    );
    expect(shared.objective).toBe("Shared");
  });

  it("runs seed 003's loop over stdio (`stepwise mcp`) with the same JSON as the CLI", async () => {
    const url = await start();
    await fs.writeFile(path.join(harness!.workspace, "spec.md"), "# spec\n");
    const client = await stdioClient(url);
    const call = async (name: string, args: Record<string, unknown> = {}) => {
      const result = await client.callTool({ name, arguments: args });
      expect(result.isError, JSON.stringify(result.content)).toBeFalsy();
      return JSON.parse((result.content as { text: string }[])[0]!.text);
    };
    sessionCreatedSchema.parse(await call("start", { goal: "Document the spec" }));
    syncInstructionsSchema.parse(await call("status"));
    expect(readyForTaskSchema.parse(await call("status")).now.current_task.id).toBe(1);
    const rejected = await call("update", { payload: { add_tasks: [{ title: "Docs", type: "docs" }] } });
    expect(rejected).toMatchObject({ status: "error", error_type: "plan_validation_failed" });
    await call("update", {
      payload: {
        add_tasks: [
          {
            title: "Write the docs",
            type: "docs",
            context_hints: ["Read `spec.md`."],
            relevant_file_paths: ["spec.md"],
          },
        ],
        update_tasks: [{ id: 1, status: "DONE" }],
      },
    });
    await call("update", { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    const run = await harness!.caller.runs.list({});
    const step = (await harness!.caller.runs.get({ runId: (run.runs[0] as { id: string }).id })).steps[1]!;
    // The agent named on the stdio command line is who the live view shows working.
    expect(step.waiting).toMatchObject({ kind: "agent", agent: "stdio-agent" });
    const { resources } = { resources: await client.listResourceTemplates() };
    expect(resources.resourceTemplates.map((template) => template.uriTemplate)).toContain("stepwise://plans/{planId}");
  });

  it("an agent submits a plan, waits for a person's approval, then follows the run with progress notifications", async () => {
    const client = await httpClient(await start());
    const plan = structured(
      await client.callTool({
        name: "plan_create",
        arguments: {
          draft: {
            goal: "Two sleeps",
            steps: [
              { id: "step_1", tool: "sleep", args: { ms: 300 } },
              { id: "step_2", tool: "sleep", args: { ms: 300 }, dependsOn: ["step_1"] },
            ],
          },
        },
      }),
      { parse: (value: unknown) => value as { id: string; version: number } },
    );
    const review = (waitSeconds: number) =>
      client.callTool({ name: "plan_review_status", arguments: { plan_id: plan.id, wait_seconds: waitSeconds } });
    expect((await review(0)).structuredContent).toMatchObject({
      state: "awaiting_review",
      review_url: `/plans/${plan.id}`,
    });
    // The person approves in the browser while the agent waits.
    const waiting = review(30);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const { runId } = await harness!.caller.plans.approve({ planId: plan.id, version: plan.version });
    expect((await waiting).structuredContent).toMatchObject({
      state: "approved",
      run_id: runId,
      approved_by: "tester",
    });

    const progress: { progress: number; total?: number }[] = [];
    const followed = await client.callTool(
      { name: "run_wait", arguments: { run_id: runId, timeout_seconds: 30 } },
      undefined,
      {
        onprogress: (update) => progress.push(update),
        timeout: 60_000,
      },
    );
    expect(followed.structuredContent).toMatchObject({ status: "completed", waited_for: "finished" });
    expect(progress.length).toBeGreaterThanOrEqual(2);
    expect(progress.at(-1)).toMatchObject({ progress: 2, total: 2 });
    expect(progress.map((update) => update.progress)).toEqual([...progress.map((update) => update.progress)].sort());
  });

  it("seed 002 plan mode: validation, a pending question polled with get_answer, and a rejection that ends the session", async () => {
    const client = await httpClient(await start());
    const call = (name: string, args: Record<string, unknown> = {}) => client.callTool({ name, arguments: args });
    const body = (result: CallResult) => JSON.parse((result.content as { text: string }[])[0]!.text);
    expect(
      problem(await call("submit_plan", { summary: "s", steps: [{ description: "d", relevant_file_paths: ["."] }] }))
        .detail,
    ).toContain("enter_plan_mode");
    // The SDK checks the declared schema first and answers with its own error text.
    const empty = await call("enter_plan_mode", { reason: "" });
    expect(empty.isError).toBe(true);
    expect((empty.content as { text: string }[])[0]!.text).toContain("Say why you want to plan first");
    const entered = body(await call("enter_plan_mode", { reason: "Risky change" }));
    expect(entered.status).toBe("plan_mode");

    const pending = body(await call("ask_user", { question: "Which branch?", wait_seconds: 0 }));
    expect(pending).toMatchObject({ status: "pending" });
    // A plan cannot be submitted over an unanswered question.
    expect(
      problem(await call("submit_plan", { summary: "s", steps: [{ description: "d", relevant_file_paths: ["."] }] }))
        .detail,
    ).toContain("waiting for its answer");
    const questions = await harness!.caller.planner.session({ sessionId: entered.planning_session_id });
    expect(questions.status).toBe("awaiting_answer");
    await harness!.caller.planner.answer({
      sessionId: entered.planning_session_id,
      questionId: pending.question_id,
      answer: "main",
    });
    expect(body(await call("get_answer", { question_id: pending.question_id, wait_seconds: 5 }))).toMatchObject({
      status: "answered",
      answer: "main",
      answered_by: "tester",
    });

    // Refused by the declared schema (checked by the SDK, in its own words) before anything is stored.
    for (const [args, text] of [
      [{ summary: "s", steps: [] }, "at least one step"],
      [{ summary: "s", steps: [{ description: "d", relevant_file_paths: ["."], risk: "extreme" }] }, "risk"],
    ] as const) {
      const refused = await call("submit_plan", args);
      expect(refused.isError).toBe(true);
      expect((refused.content as { text: string }[])[0]!.text).toContain(text);
    }
    const submitted = body(
      await call("submit_plan", {
        summary: "Do it",
        steps: [{ description: "Change the config", relevant_file_paths: ["."], tools: ["edit_file"] }],
      }),
    );
    const { plan } = await harness!.caller.plans.get({ planId: submitted.plan_id });
    expect(plan.steps[0]).toMatchObject({
      tool: "agent_task",
      labels: ["edit_file"],
      description: "Change the config",
    });

    // Only a person reviews; the rejection is audited, reaches the agent, and ends plan mode.
    await harness!.caller.plans.review({
      planId: plan.id,
      version: plan.version,
      decision: "reject",
      comment: "Not now",
    });
    expect(
      (await client.callTool({ name: "plan_review_status", arguments: { plan_id: plan.id } })).structuredContent,
    ).toMatchObject({ state: "rejected", reviewed_by: "tester", comment: "Not now" });
    expect(
      problem(
        await call("submit_plan", { summary: "again", steps: [{ description: "d", relevant_file_paths: ["."] }] }),
      ).detail,
    ).toContain("cancelled");
    const { tools } = await client.listTools();
    expect(tools.some((tool) => tool.name === "plan_review")).toBe(false);
  });

  it("reads plans as resources, JSON and Markdown", async () => {
    const client = await httpClient(await start());
    const plan = structured(
      await client.callTool({
        name: "plan_create",
        arguments: { draft: { goal: "Resource plan", steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }] } },
      }),
      { parse: (value: unknown) => value as { id: string } },
    );
    const json = await client.readResource({ uri: `stepwise://plans/${plan.id}` });
    expect(JSON.parse((json.contents[0] as { text: string }).text)).toMatchObject({
      id: plan.id,
      goal: "Resource plan",
    });
    const markdown = await client.readResource({ uri: `stepwise://plans/${plan.id}/markdown` });
    expect((markdown.contents[0] as { text: string }).text).toContain("# Resource plan");
  });

  it("reads a plan resource only as its operation allows: a policy refusing plan reads, and a revoked credential, are refused", async () => {
    // A policy under which nobody reads plans: the resources are read through plan.get and
    // plan.markdown, so the policy's refusal is the resource's, as it is the tool's.
    const noPlanReads = createAuthority([
      ...AUTHORITY_RULES,
      {
        id: "test-no-plan-reads",
        effect: "forbid",
        actions: ["operation.call"],
        says: "Nobody reads plans (this test's policy).",
        when: (_principal, { operation }) => operation?.name === "plan.get" || operation?.name === "plan.markdown",
      },
    ]);
    const url = await start({ accessToken: "person-token", authority: noPlanReads });
    const agent = await httpClient(url);
    const plan = structured(
      await agent.callTool({
        name: "plan_create",
        arguments: { draft: { goal: "Hidden plan", steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }] } },
      }),
      { parse: (value: unknown) => value as { id: string } },
    );
    expect(problem(await agent.callTool({ name: "plan_get", arguments: { plan_id: plan.id } })).code).toBe("forbidden");
    for (const uri of [`stepwise://plans/${plan.id}`, `stepwise://plans/${plan.id}/markdown`]) {
      await expect(agent.readResource({ uri }), uri).rejects.toThrow(/plan\.(get|markdown)/);
    }

    // Under the production policy: a person's session reads the plan until their credential is revoked.
    await api!.close();
    await harness!.close();
    const open = await start({ accessToken: "person-token" });
    const pool = harness!.app.db.pool;
    const rita = await asAdmin(() =>
      addPrincipal(pool, { kind: "person", name: "rita", role: "viewer", createdBy: "user" }),
    );
    const person = await httpClient(open, rita.token, { "x-stepwise-agent": "" });
    const readable = structured(
      await (
        await httpClient(open)
      ).callTool({
        name: "plan_create",
        arguments: { draft: { goal: "Open plan", steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }] } },
      }),
      { parse: (value: unknown) => value as { id: string } },
    );
    const uri = `stepwise://plans/${readable.id}`;
    expect(JSON.parse(((await person.readResource({ uri })).contents[0] as { text: string }).text)).toMatchObject({
      goal: "Open plan",
    });
    await asAdmin(() => revokeCredential(pool, rita.credentialId, "user"));
    await expect(person.readResource({ uri })).rejects.toThrow();
  });

  it("sits behind the door: no token, a wrong token, a foreign Origin, or another caller's session are refused", async () => {
    const url = await start({ accessToken: "person-token" });
    const initialize = (headers: Record<string, string>) =>
      fetch(`${url}/api/mcp`, {
        method: "POST",
        headers: { "content-type": "application/json", accept: "application/json, text/event-stream", ...headers },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } },
        }),
      });
    expect((await initialize({})).status).toBe(401);
    expect((await initialize({ authorization: "Bearer nope" })).status).toBe(401);
    expect((await initialize({ authorization: `Bearer ${AGENT_TOKEN}`, origin: "http://attacker.test" })).status).toBe(
      403,
    );
    const ok = await initialize({ authorization: `Bearer ${AGENT_TOKEN}` });
    expect(ok.status).toBe(200);
    const sessionId = ok.headers.get("mcp-session-id")!;
    // The person's token may use MCP too, but not the agent's session.
    const hijack = await fetch(`${url}/api/mcp`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        accept: "application/json, text/event-stream",
        authorization: "Bearer person-token",
        "mcp-session-id": sessionId,
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }),
    });
    expect(hijack.status).toBe(403);
    const unknown = await fetch(`${url}/api/mcp`, {
      method: "POST",
      headers: { authorization: `Bearer ${AGENT_TOKEN}`, "mcp-session-id": "nope", "content-type": "application/json" },
      body: "{}",
    });
    expect(unknown.status).toBe(404);
    // A session's requests are screened like every other body before the SDK parses them.
    const call = (body: string) =>
      fetch(`${url}/api/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${AGENT_TOKEN}`,
          "mcp-session-id": sessionId,
        },
        body,
      });
    const poisoned = await call(
      '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"plan_get","arguments":{"__proto__":{"x":1}}}}',
    );
    expect(poisoned.status).toBe(400);
    expect(((await poisoned.json()) as { detail: string }).detail).toMatch(/__proto__/);
    const deep = await call(
      `{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"plan_get","arguments":{"a":${"[".repeat(100)}${"]".repeat(100)}}}}`,
    );
    expect(deep.status).toBe(400);
  });

  it("decides authority per call, not at initialize: a demoted person's and a revoked agent's open sessions are refused on the next call", async () => {
    const url = await start({ accessToken: "person-token" });
    const pool = harness!.app.db.pool;
    const petra = await asAdmin(() =>
      addPrincipal(pool, { kind: "person", name: "petra", role: "reviewer", createdBy: "user" }),
    );
    const bot = await asAdmin(() => addPrincipal(pool, { kind: "agent", name: "mcp-bot", createdBy: "user" }));
    const person = await httpClient(url, petra.token, { "x-stepwise-agent": "" });
    const agent = await httpClient(url, bot.token, { "x-stepwise-agent": "" });
    const setUp = (client: Client, objective: string) =>
      client.callTool({ name: "planning_setup_plan", arguments: { objective } });
    const listPlans = (client: Client) => client.callTool({ name: "plan_list", arguments: {} });
    expect((await setUp(person, "Before")).isError).toBeFalsy();
    expect((await setUp(agent, "Before")).isError).toBeFalsy();

    // Petra becomes a viewer: the same session still reads, but proposes nothing — by seed 000's
    // own tools, by an operation's tool, or by a resource she may still read.
    await asAdmin(() => setRole(pool, petra.principalId, "viewer", "user"));
    const refused = await setUp(person, "After");
    expect(refused.isError).toBe(true);
    expect(problem(refused)).toMatchObject({ code: "forbidden" });
    expect(problem(refused).detail).toContain("petra is a viewer");
    const created = await person.callTool({
      name: "plan_create",
      arguments: { draft: { goal: "x", steps: [{ id: "s", tool: "echo", args: { value: 1 } }] } },
    });
    expect(problem(created)).toMatchObject({ code: "forbidden" });
    expect((await listPlans(person)).isError).toBeFalsy();

    // The agent's credential revoked: its open session is refused at the very next call.
    await asAdmin(() => revokeCredential(pool, bot.credentialId, "user"));
    await expect(listPlans(agent)).rejects.toThrow();
    await expect(setUp(agent, "After")).rejects.toThrow();
  });

  it("caps sessions per credential: an agent opening sessions in a loop replaces its own and never locks the person out", async () => {
    const url = await start({ accessToken: "person-token" });
    const initialize = async (token: string) => {
      const response = await fetch(`${url}/api/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${token}`,
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "initialize",
          params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "x", version: "1" } },
        }),
      });
      expect(response.status).toBe(200);
      await response.text();
      return response.headers.get("mcp-session-id")!;
    };
    const ping = async (token: string, sessionId: string) => {
      const response = await fetch(`${url}/api/mcp`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          accept: "application/json, text/event-stream",
          authorization: `Bearer ${token}`,
          "mcp-session-id": sessionId,
          "mcp-protocol-version": "2025-06-18",
        },
        body: JSON.stringify({ jsonrpc: "2.0", id: 2, method: "ping" }),
      });
      await response.text();
      return response.status;
    };
    const personSession = await initialize("person-token");
    const agentSessions: string[] = [];
    for (let i = 0; i < MAX_SESSIONS_PER_CREDENTIAL + 40; i++) agentSessions.push(await initialize(AGENT_TOKEN));
    // The person's session and a new one of theirs are untouched by the agent's loop.
    expect(await ping("person-token", personSession)).toBe(200);
    const laterPersonSession = await initialize("person-token");
    expect(await ping("person-token", laterPersonSession)).toBe(200);
    // The agent keeps its newest sessions; its oldest were ended to make room.
    expect(await ping(AGENT_TOKEN, agentSessions.at(-1)!)).toBe(200);
    expect(await ping(AGENT_TOKEN, agentSessions.at(-MAX_SESSIONS_PER_CREDENTIAL)!)).toBe(200);
    expect(await ping(AGENT_TOKEN, agentSessions[0]!)).toBe(404);
    expect(await ping(AGENT_TOKEN, agentSessions.at(-MAX_SESSIONS_PER_CREDENTIAL - 1)!)).toBe(404);
    // Another agent name on the same credential counts against the same cap, and cannot use another's session.
    expect(await ping("person-token", agentSessions.at(-1)!)).toBe(403);
  });
});
