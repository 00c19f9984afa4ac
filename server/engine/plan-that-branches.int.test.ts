import fs from "node:fs/promises";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { readEvents } from "../events/store";
import type { RunStepView } from "./run-view";

/**
 * Issue 40's "done when", end to end: an agent writes, through the MCP door, the plan "run the
 * tests; for each failing test file, ask an agent to fix it; if all pass, open the release notes
 * sub-plan"; a person reviews it with its branches in words and approves; it runs twice — once with
 * failing files (one agent task per file, the release notes skipped with the reason) and once with
 * none (no tasks, the release notes sub-plan runs, its own gated write decided in the child).
 *
 * "Run the tests" is a `glob` over the markers a test runner leaves for failing files
 * (`test-results/failing/<file>`): a read-only tool whose output schema has a list, so the plan's
 * `forEach` and `when` are checked against it at plan time.
 */

const AGENT_TOKEN = "branching-plan-agent-token";
let harness: Harness;
let api: Awaited<ReturnType<typeof startApiServer>>;
let client: Client;
/** The same agent's name under another credential of its own, and another agent on the shared token. */
let sameNameOtherCredential: Client;
let otherAgent: Client;

async function mcpClient(token: string, agentName?: string): Promise<Client> {
  const made = new Client({ name: "plan-that-branches", version: "1.0.0" });
  await made.connect(
    new StreamableHTTPClientTransport(new URL("/api/mcp", api.url), {
      requestInit: {
        headers: { authorization: `Bearer ${token}`, ...(agentName && { "x-stepwise-agent": agentName }) },
      },
    }),
  );
  return made;
}

beforeAll(async () => {
  harness = await startHarness();
  // With an access token the door looks named credentials up (without one, it trusts the local user).
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN, accessToken: "branching-plan-access-token" });
  // The agent is a named agent with a credential of its own: its plan is its own under that credential.
  const agent = await harness.caller.people.add({ kind: "agent", name: "release-agent" });
  const second = await harness.caller.people.addCredential({ principalId: agent.principalId });
  client = await mcpClient(agent.token);
  sameNameOtherCredential = await mcpClient(second.token);
  otherAgent = await mcpClient(AGENT_TOKEN, "other-agent");
}, 120_000);
afterAll(async () => {
  for (const each of [client, sameNameOtherCredential, otherAgent]) await each?.close().catch(() => undefined);
  await api?.close();
  await harness?.close();
});

/** An MCP tool call that must succeed; its answer (snake_case), read loosely. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function agentCall(name: string, args: Record<string, unknown>, by = client): Promise<Record<string, any>> {
  const result = await by.callTool({ name, arguments: args });
  const text = (result.content as { text: string }[])[0]!.text;
  expect(result.isError, text).toBeFalsy();
  return JSON.parse(text) as Record<string, unknown>;
}

/** An MCP tool call that must be refused; the refusal's text. */
async function refusedCall(by: Client, name: string, args: Record<string, unknown>): Promise<string> {
  const result = await by.callTool({ name, arguments: args });
  const text = (result.content as { text: string }[])[0]!.text;
  expect(result.isError, text).toBe(true);
  return text;
}

/**
 * Seed 003's loop as the agent runs it over MCP: `status` until it hands out a task (syncing the
 * instructions, waiting while Stepwise or a person has the turn), IN_PROGRESS, DONE — until the
 * plan is completed; then the final summary. Returns each task as it was handed out.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function agentLoop(timeoutMs = 60_000): Promise<Record<string, any>[]> {
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const handed: Record<string, any>[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await agentCall("status", {});
    const reason = status.now.reason as string;
    if (reason === "plan_completed") {
      await agentCall("update", { payload: { final_summary: `Fixed ${handed.length} test files.` } });
      return handed;
    }
    if (reason === "ready_for_task") {
      const task = status.now.current_task;
      handed.push({ ...task, brief: status.now.brief });
      const ref = { id: task.id, ...(task.instance !== undefined && { instance: task.instance }) };
      await agentCall("update", { payload: { update_tasks: [{ ...ref, status: "IN_PROGRESS" }] } });
      await agentCall("update", {
        payload: { update_tasks: [{ ...ref, status: "DONE", notes: `fixed ${String(task.item)}` }] },
      });
      continue;
    }
    expect(["sync_instructions", "waiting"]).toContain(reason);
    if (Date.now() > deadline) throw new Error(`The agent's loop did not finish: ${JSON.stringify(status)}`);
    if (reason === "waiting") await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function stepsOf(runId: string): Promise<Map<string, RunStepView>> {
  const run = await harness.caller.runs.get({ runId });
  return new Map((run.steps as RunStepView[]).map((step) => [step.stepId, step]));
}

async function childOf(runId: string, stepId: string, timeoutMs = 60_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { rows } = await harness.app.db.pool.query<{ id: string }>(
      "select id from runs where parent_run_id = $1 and parent_step_id = $2",
      [runId, stepId],
    );
    if (rows[0]) return rows[0].id;
    if (Date.now() > deadline) throw new Error(`${stepId} of ${runId} started no child run`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

const RELEASE_NOTES = "RELEASE_NOTES.md";
const FAILING = "test-results/failing";

describe("a plan that branches, written by an agent and approved by a person", () => {
  let releasePlanId: string;
  let planId: string;

  it("the agent writes it through MCP; the review shows the condition in words, the fan-out and the sub-plan", async () => {
    const releasePlan = await agentCall("plan_create", {
      draft: {
        goal: "Open the release notes",
        steps: [
          {
            id: "step_1",
            title: "Write the release notes",
            tool: "write_file",
            args: { path: RELEASE_NOTES, content: "# Release notes\n\nAll tests pass.\n" },
          },
        ],
      },
    });
    releasePlanId = releasePlan.id as string;
    expect(releasePlan.steps[0]).toMatchObject({ approval_required: true });

    const plan = await agentCall("plan_create", {
      draft: {
        goal: "Run the tests; fix each failing test file; if all pass, open the release notes",
        steps: [
          {
            id: "step_1",
            title: "Run the tests",
            tool: "glob",
            args: { pattern: `${FAILING}/*.test.ts` },
          },
          {
            id: "step_2",
            title: "Fix the failing test file",
            tool: "agent_task",
            args: { instructions: "$item", acceptance: ["The test file passes"] },
            relevant_file_paths: ["."],
            depends_on: ["step_1"],
            for_each: "$step_1.paths",
            max_items: 20,
            // The person decides the group on the concrete list of files, once it is known.
            approval_required: true,
          },
          {
            id: "step_3",
            title: "Open the release notes",
            tool: "run_plan",
            args: { plan_id: releasePlanId, version: 1 },
            depends_on: ["step_2"],
            when: "$step_1.paths.length == 0",
          },
        ],
      },
    });
    planId = plan.id as string;
    expect(plan.source).toBe("agent");
    expect(plan.steps[1]).toMatchObject({ for_each: "$step_1.paths", max_items: 20, args: { instructions: "$item" } });
    expect(plan.steps[2]).toMatchObject({ when: "$step_1.paths.length == 0", approval_required: true });

    // A condition on a field the tool does not produce is refused at plan time, through the same door.
    const refused = await client.callTool({
      name: "plan_create",
      arguments: {
        draft: {
          goal: "Wrong field",
          steps: [
            { id: "step_1", title: "Run the tests", tool: "glob", args: { pattern: "*.ts" } },
            {
              id: "step_2",
              title: "Fix",
              tool: "agent_task",
              args: { instructions: "$item" },
              relevant_file_paths: ["."],
              depends_on: ["step_1"],
              for_each: "$step_1.files",
            },
          ],
        },
      },
    });
    expect(refused.isError).toBe(true);
    expect((refused.content as { text: string }[])[0]!.text).toContain('has no field \\"files\\"');

    // The person's review: the condition in words, the fan-out and the sub-plan in the export.
    const assessments = await harness.caller.plans.assessments({ planId, version: 1 });
    expect(assessments.step_3!.conditionWords).toBe("the number of step_1's paths is 0");
    expect(assessments.step_2!.conditionWords).toBeUndefined();
    const markdown = (await harness.caller.plans.export({ planId, format: "markdown" })).content;
    expect(markdown).toContain("- Runs only if the number of step_1's paths is 0 (`$step_1.paths.length == 0`)");
    expect(markdown).toContain(
      "- Runs once for each element of `$step_1.paths` (`$item` in its arguments), at most 20",
    );
    expect(markdown).toContain(
      `- Sub-plan: runs plan \`${releasePlanId}\` version 1 as a child run; its gated steps wait for their own approval`,
    );
  });

  it("with failing files: the person decides the group on its list, then the agent's own loop gets one task per file", async () => {
    await fs.mkdir(path.join(harness.workspace, FAILING), { recursive: true });
    for (const file of ["math.test.ts", "strings.test.ts"]) {
      await fs.writeFile(path.join(harness.workspace, FAILING, file), "failed\n");
    }
    const { runId } = await harness.caller.plans.approve({ planId, version: 1 });

    // The gated group: each instance waits for the person, who sees the concrete list.
    const first = await harness.waitForStep(runId, "step_2[0]", "awaiting_approval");
    const second = await harness.waitForStep(runId, "step_2[1]", "awaiting_approval");
    expect(first).toMatchObject({ group: "step_2", item: `${FAILING}/math.test.ts` });
    expect(second).toMatchObject({ group: "step_2", item: `${FAILING}/strings.test.ts` });
    const group = await harness.caller.runs.group({ runId, stepId: "step_2" });
    expect(group.instances.map((instance) => instance.item)).toEqual([
      `${FAILING}/math.test.ts`,
      `${FAILING}/strings.test.ts`,
    ]);
    expect((await stepsOf(runId)).get("step_2")).toMatchObject({ status: "running", groupSize: 2 });
    // The branch waits for the group: nothing decided about the release notes yet.
    expect((await stepsOf(runId)).get("step_3")!.status).toBe("pending");

    // The approval made the run the author's session: its status says what it waits for.
    let status = await agentCall("status", {});
    if (status.now.reason === "sync_instructions") status = await agentCall("status", {});
    expect(status.now).toMatchObject({ reason: "waiting", message: "Waiting for a person to approve 2 steps." });
    const sessionId = status.session.id as string;
    const session = await harness.app.db.pool.query("select run_id, created_by from agent_sessions where id = $1", [
      sessionId,
    ]);
    expect(session.rows[0]).toEqual({ run_id: runId, created_by: "release-agent" });
    // Asked of the policy at each call: neither another agent nor the same name under another
    // credential takes or reports this plan's tasks.
    for (const intruder of [otherAgent, sameNameOtherCredential]) {
      expect(await refusedCall(intruder, "status", { session: sessionId })).toContain("only that agent");
      expect(
        await refusedCall(intruder, "update", {
          session: sessionId,
          payload: { update_tasks: [{ id: 2, instance: 0, status: "IN_PROGRESS" }] },
        }),
      ).toContain("only that agent");
    }

    await harness.caller.runs.decideGroup({ runId, stepId: "step_2", approve: true, listHash: group.listHash });

    // The agent's own loop: each file is its own task, `$item` written into its instructions.
    const handed = await agentLoop();
    expect(handed.map((task) => [task.id, task.instance, task.item, task.instructions])).toEqual([
      [2, 0, `${FAILING}/math.test.ts`, `${FAILING}/math.test.ts`],
      [2, 1, `${FAILING}/strings.test.ts`, `${FAILING}/strings.test.ts`],
    ]);
    expect(handed[0]!.brief).toMatchObject({ task_id: 2, instance: 0, item: `${FAILING}/math.test.ts` });
    expect(handed[0]).toMatchObject({ executor: "agent", title: "Fix the failing test file" });

    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    const steps = await stepsOf(runId);
    expect(steps.get("step_2")!.status).toBe("completed");
    expect(steps.get("step_2[1]")!.result).toMatchObject({
      ok: true,
      value: { doneBy: "release-agent", note: `fixed ${FAILING}/strings.test.ts` },
    });
    expect(steps.get("step_3")).toMatchObject({
      status: "skipped",
      reason: "Condition not met: the number of step_1's paths is 0",
    });
    // The release notes plan never started, and its side effect never happened.
    const children = await harness.app.db.pool.query("select 1 from runs where parent_run_id = $1", [runId]);
    expect(children.rowCount).toBe(0);
    await expect(fs.access(path.join(harness.workspace, RELEASE_NOTES))).rejects.toThrow();
  });

  it("with all tests passing: a group of none, then the release notes sub-plan, each side effect after its approval", async () => {
    await fs.rm(path.join(harness.workspace, "test-results"), { recursive: true, force: true });
    const { runId } = await harness.caller.plans.approve({ planId, version: 1 });

    // The sub-plan step is gated: it waits for a person, and no child run exists yet.
    await harness.waitForStep(runId, "step_3", "awaiting_approval");
    const before = await stepsOf(runId);
    // A group of none: step_2 completed at once with no instances and an empty list as its output.
    expect(before.get("step_2")).toMatchObject({ status: "completed", result: { ok: true, value: [] } });
    expect([...before.keys()].some((id) => id.startsWith("step_2["))).toBe(false);
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.find((e) => e.type === "step.running" && e.stepId === "step_2")!.data).toMatchObject({
      instances: [],
    });
    const none = await harness.app.db.pool.query("select 1 from runs where parent_run_id = $1", [runId]);
    expect(none.rowCount).toBe(0);

    // The person decides on exactly what was shown: the child plan and version, bound by its hash.
    const shown = (await harness.caller.runs.approval({ runId, stepId: "step_3" })).approval!;
    expect(shown).toMatchObject({ tool: "run_plan", resolvedArgs: { plan_id: releasePlanId, version: 1 } });
    await harness.caller.runs.decide({
      runId,
      stepId: "step_3",
      approve: true,
      definitionHash: shown.definitionHash,
    });
    const childRunId = await childOf(runId, "step_3");
    // The child's write waits for its own decision: nothing written yet.
    await harness.waitForStep(childRunId, "step_1", "awaiting_approval");
    await expect(fs.access(path.join(harness.workspace, RELEASE_NOTES))).rejects.toThrow();
    expect((await stepsOf(runId)).get("step_3")).toMatchObject({
      status: "running",
      waiting: { kind: "child_run", runId: childRunId },
    });

    const write = (await harness.caller.runs.approval({ runId: childRunId, stepId: "step_1" })).approval!;
    expect(write).toMatchObject({ tool: "write_file", resolvedArgs: { path: RELEASE_NOTES } });
    await harness.caller.runs.decide({
      runId: childRunId,
      stepId: "step_1",
      approve: true,
      definitionHash: write.definitionHash,
    });
    const child = await harness.waitForRun(childRunId);
    expect(child.status).toBe("completed");
    expect(child.parent).toEqual({ runId, stepId: "step_3" });
    const parent = await harness.waitForRun(runId);
    expect(parent.status).toBe("completed");
    expect((await stepsOf(runId)).get("step_3")!.result).toMatchObject({
      ok: true,
      value: { run_id: childRunId, plan_id: releasePlanId, version: 1, status: "completed" },
    });
    expect(await fs.readFile(path.join(harness.workspace, RELEASE_NOTES), "utf8")).toContain("All tests pass.");
  });
});
