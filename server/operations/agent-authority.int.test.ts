import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { InMemoryTransport } from "@modelcontextprotocol/sdk/inMemory.js";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { IDENTITY_HEADER, signIdentity } from "../http/door";
import { createPlanFromApi } from "../http/plan-api";
import { createMcpServer } from "../mcp/server";
import { builtinTools, createToolRegistry } from "../tools/registry";
import { defineTool } from "../tools/types";
import type { Identity } from "../identity";
import { invokeOperation } from "./operation";
import { findOperation } from "./registry";

/**
 * Agents propose, a person disposes — the scenarios an agent holding only its own credential
 * tried, through the operations every door adapts: registering a directory, editing its running
 * session's plan to run something new, resuming a person's pause, retrying what a person denied.
 */
const PERSON: Identity = { kind: "person", name: "owner" };
// The name a person goes by, claimed by an agent: its kind still tells them apart.
const AGENT: Identity = { kind: "agent", name: "owner" };

/**
 * A tool that changes the world (it writes a marker file) yet needs no approval by default — the
 * kind of step an agent could otherwise add to its running session and have run at once.
 */
function markerTool(marker: string) {
  return defineTool({
    name: "touch_marker",
    description: "Writes a marker file (test tool with a side effect and no default gate)",
    inputSchema: z.object({ text: z.string().default("ran") }),
    capability: "data.transform",
    capabilityLabel: "Write a marker",
    readOnly: false,
    destructive: false,
    idempotent: true,
    requiresApproval: false,
    defaultTimeoutSeconds: 10,
    async execute({ text }) {
      await fs.writeFile(marker, text);
      return { ok: true };
    },
  });
}

let harness: Harness | undefined;
const cleanup: string[] = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  for (const dir of cleanup.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

async function tempDir(): Promise<string> {
  const dir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-authz-"));
  cleanup.push(dir);
  return dir;
}

function call(name: string, identity: Identity, input: unknown) {
  return invokeOperation(findOperation(name)!, { app: harness!.app, identity }, input);
}

async function startSession(goal: string): Promise<{ planId: string; runId: string }> {
  await call("agent.start", AGENT, { goal });
  const row = await harness!.app.db.pool.query<{ plan_id: string; run_id: string }>(
    "select plan_id, run_id from agent_sessions order by created_at desc limit 1",
  );
  return { planId: row.rows[0]!.plan_id, runId: row.rows[0]!.run_id };
}

async function stepStatus(runId: string, stepId: string): Promise<string | undefined> {
  const run = await harness!.caller.runs.get({ runId });
  return (run.steps as { stepId: string; status: string }[]).find((step) => step.stepId === stepId)?.status;
}

async function waitForStep(runId: string, stepId: string, status: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const current = await stepStatus(runId, stepId);
    if (current === status) return;
    if (Date.now() > deadline) throw new Error(`${stepId} is ${current}, not ${status}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/** An agent adds a step to its running session's plan; returns the new step's id. */
async function agentAddsStep(planId: string, step: { tool: string; args: Record<string, unknown> }) {
  const current = (await call("plan.get", AGENT, { planId })) as { version: number; steps: { id: string }[] };
  const edited = (await call("plan.edit", AGENT, {
    planId,
    baseVersion: current.version,
    edit: { kind: "addStep", position: current.steps.length, step: { ...step, approvalRequired: false } },
  })) as { steps: { id: string; approvalRequired: boolean }[] };
  return edited.steps[edited.steps.length - 1]!;
}

describe("agents propose, a person disposes", () => {
  it("an agent cannot register a directory: not by workspace.register, agent.start, POST /api/plan or MCP start", async () => {
    harness = await startHarness({ worker: false });
    // The server's default workspace, named by its path, is the default.
    await expect(
      call("agent.start", AGENT, { goal: "Work here", workspace: harness.workspace }),
    ).resolves.toMatchObject({ status: "session_created" });
    const dir = await tempDir();
    await expect(call("workspace.register", AGENT, { path: dir })).rejects.toMatchObject({ code: "forbidden" });
    await expect(call("agent.start", AGENT, { goal: "Work there", workspace: dir })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("not a registered workspace"),
    });
    const response = await createPlanFromApi(
      new Request("http://127.0.0.1/api/plan", {
        method: "POST",
        headers: { "content-type": "application/json", [IDENTITY_HEADER]: signIdentity(AGENT) },
        body: JSON.stringify({
          goal: "Read there",
          workspace: dir,
          steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }],
        }),
      }),
      harness.app,
    );
    expect(response.status).toBe(403);

    const server = createMcpServer({ app: harness.app, identity: AGENT, sessionId: () => "agent-mcp" });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(clientSide);
    const started = await client.callTool({ name: "start", arguments: { goal: "Work there", workspace: dir } });
    expect(started.isError).toBe(true);
    expect(JSON.parse((started.content as { text: string }[])[0]!.text)).toMatchObject({ code: "forbidden" });
    await client.close();
    await server.close();

    // Nothing was registered along the way.
    const { workspaces } = (await call("workspace.list", AGENT, {})) as { workspaces: { path: string }[] };
    const real = await fs.realpath(dir);
    expect(workspaces.map((workspace) => workspace.path)).not.toContain(real);

    // Once a person registered it, the agent may work there, by path or by id.
    const registered = (await call("workspace.register", PERSON, { path: dir })) as { id: string };
    await expect(call("agent.start", AGENT, { goal: "Work there", workspace: dir })).resolves.toMatchObject({
      status: "session_created",
    });
    await expect(
      call("agent.start", AGENT, { goal: "Work there again", workspace: registered.id }),
    ).resolves.toMatchObject({ status: "session_created" });
  });

  it("a step an agent adds to its running session does not run without a person; a read-only one does", async () => {
    const marker = path.join(await tempDir(), "marker");
    harness = await startHarness({ tools: createToolRegistry([...builtinTools, markerTool(marker)]) });
    const { planId, runId } = await startSession("Change something");

    const effect = await agentAddsStep(planId, { tool: "touch_marker", args: { text: "agent" } });
    expect(effect.approvalRequired).toBe(true);
    await waitForStep(runId, effect.id, "awaiting_approval");
    const reader = await agentAddsStep(planId, { tool: "echo", args: { value: "look" } });
    await waitForStep(runId, reader.id, "completed");
    // The read-only step ran; the one with an effect still waits, and its effect did not happen.
    expect(await stepStatus(runId, effect.id)).toBe("awaiting_approval");
    await expect(fs.stat(marker)).rejects.toMatchObject({ code: "ENOENT" });

    await expect(call("run.decide", AGENT, { runId, stepId: effect.id, approve: true })).rejects.toMatchObject({
      code: "forbidden",
    });
    await call("run.decide", PERSON, { runId, stepId: effect.id, approve: true });
    await waitForStep(runId, effect.id, "completed");
    expect(await fs.readFile(marker, "utf8")).toBe("agent");

    // The decision is stored as a person's; the adoption as the agent's, whatever name it used.
    const decisions = await harness.caller.runs.decisions({ runId });
    expect(decisions).toEqual([expect.objectContaining({ stepId: effect.id, actor: "owner", actorKind: "person" })]);
    const { entries } = (await call("audit.list", PERSON, { runId })) as {
      entries: { action: string; actorKind: string }[];
    };
    expect(entries.filter((entry) => entry.action === "run.plan_adopted").map((entry) => entry.actorKind)).toEqual([
      "agent",
      "agent",
    ]);
    expect(entries.find((entry) => entry.action === "step.approved")?.actorKind).toBe("person");
  });

  it("an agent cannot resume a run a person paused, but may resume its own pause", async () => {
    harness = await startHarness({ worker: false });
    const { runId } = await startSession("Pause me");
    await call("run.pause", PERSON, { runId });
    await expect(call("run.resume", AGENT, { runId })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("only a person may resume it"),
    });
    expect((await harness.caller.runs.get({ runId })).status).toBe("paused");
    await call("run.resume", PERSON, { runId });
    expect((await harness.caller.runs.get({ runId })).status).toBe("running");

    await call("run.pause", AGENT, { runId });
    await call("run.resume", AGENT, { runId });
    expect((await harness.caller.runs.get({ runId })).status).toBe("running");
    const { entries } = (await call("audit.list", PERSON, { runId })) as {
      entries: { action: string; actorKind: string }[];
    };
    expect(
      entries
        .filter((entry) => entry.action === "run.paused" || entry.action === "run.resumed")
        .map((entry) => `${entry.action}:${entry.actorKind}`)
        .reverse(),
    ).toEqual(["run.paused:person", "run.resumed:person", "run.paused:agent", "run.resumed:agent"]);
  });

  it("an agent cannot retry or skip a step a person denied, nor run it by editing it", async () => {
    const marker = path.join(await tempDir(), "marker");
    harness = await startHarness({ tools: createToolRegistry([...builtinTools, markerTool(marker)]) });
    const { planId, runId } = await startSession("Try again");
    const effect = await agentAddsStep(planId, { tool: "touch_marker", args: {} });
    await waitForStep(runId, effect.id, "awaiting_approval");
    await call("run.decide", PERSON, { runId, stepId: effect.id, approve: false, comment: "no" });
    for (const name of ["run.retry_step", "run.skip_step"]) {
      await expect(call(name, AGENT, { runId, stepId: effect.id })).rejects.toMatchObject({ code: "forbidden" });
    }
    // The agent cannot launder it either: changing the denied step makes a new gated step.
    const current = (await call("plan.get", AGENT, { planId })) as { version: number };
    const edited = (await call("plan.edit", AGENT, {
      planId,
      baseVersion: current.version,
      edit: { kind: "updateStep", stepId: effect.id, changes: { args: { text: "again" } } },
    })) as { steps: { id: string; approvalRequired: boolean }[] };
    expect(edited.steps.find((step) => step.id === effect.id)?.approvalRequired).toBe(true);
    expect(await stepStatus(runId, effect.id)).toBe("skipped");
    await expect(fs.stat(marker)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("an agent cannot start the built-in planner through POST /api/plan {goal}, quick or deep: it asks planner.start's authority", async () => {
    harness = await startHarness({ worker: false });
    for (const mode of ["quick", "deep"]) {
      const response = await createPlanFromApi(
        new Request("http://127.0.0.1/api/plan", {
          method: "POST",
          headers: { "content-type": "application/json", [IDENTITY_HEADER]: signIdentity(AGENT) },
          body: JSON.stringify({ goal: "Plan this for me", mode }),
        }),
        harness.app,
      );
      expect(response.status).toBe(403);
      expect((await response.json()).detail).toContain("planner.start");
    }
    const sessions = await harness.app.db.pool.query("select 1 from planning_sessions");
    expect(sessions.rowCount).toBe(0);
  });

  it("what an agent does through MCP's own tools and seed 001's POST /api/plan is stored as an agent's", async () => {
    harness = await startHarness({ worker: false });
    const server = createMcpServer({ app: harness.app, identity: AGENT, sessionId: () => "todo" });
    const [clientSide, serverSide] = InMemoryTransport.createLinkedPair();
    await server.connect(serverSide);
    const client = new Client({ name: "agent", version: "1.0.0" });
    await client.connect(clientSide);
    const setUp = await client.callTool({ name: "planning_setup_plan", arguments: { objective: "Todo" } });
    expect(setUp.isError).toBeFalsy();
    await client.close();
    await server.close();
    const response = await createPlanFromApi(
      new Request("http://127.0.0.1/api/plan", {
        method: "POST",
        headers: { "content-type": "application/json", [IDENTITY_HEADER]: signIdentity(AGENT) },
        body: JSON.stringify({ goal: "Seed 001", steps: [{ id: "step_1", tool: "echo", args: { value: 1 } }] }),
      }),
      harness.app,
    );
    expect(response.status).toBe(201);

    const kinds = await harness.app.db.pool.query<{ action: string; actor_kind: string }>(
      "select action, actor_kind from audit_entries where actor = 'owner' order by id",
    );
    expect(kinds.rows.map((row) => row.action)).toEqual(expect.arrayContaining(["plan.created", "plan.approved"]));
    expect(new Set(kinds.rows.map((row) => row.actor_kind))).toEqual(new Set(["agent"]));
  });

  it("an agent clearing the failure signal of a person-approved step does not run it again", async () => {
    const marker = path.join(await tempDir(), "missing-dir", "marker");
    harness = await startHarness({ tools: createToolRegistry([...builtinTools, markerTool(marker)]) });
    const { planId, runId } = await startSession("Fail once");
    const effect = await agentAddsStep(planId, { tool: "touch_marker", args: {} });
    await waitForStep(runId, effect.id, "awaiting_approval");
    await call("run.decide", PERSON, { runId, stepId: effect.id, approve: true });
    await waitForStep(runId, effect.id, "failed");
    const signal = await harness.app.db.pool.query<{ key: string }>(
      "select key from signals where raised_by = 'stepwise' and cleared_at is null",
    );
    // The directory exists now: a retry would succeed and write the marker.
    await fs.mkdir(path.dirname(marker));
    const cleared = (await call("agent.alert", AGENT, { alert: { clear: signal.rows[0]!.key } })) as {
      message: string;
    };
    expect(cleared.message).toContain("stays failed until a person retries it");
    expect(await stepStatus(runId, effect.id)).toBe("failed");
    await call("run.retry_step", PERSON, { runId, stepId: effect.id });
    await waitForStep(runId, effect.id, "completed");
    expect(await fs.readFile(marker, "utf8")).toBe("ran");
  });
});
