import fs from "node:fs/promises";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { readEvents } from "../events/store";
import { updateAgentTasks } from "./engine";
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

beforeAll(async () => {
  harness = await startHarness();
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  client = new Client({ name: "plan-that-branches", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/api/mcp", api.url), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": "release-agent" } },
    }),
  );
}, 120_000);
afterAll(async () => {
  await client?.close().catch(() => undefined);
  await api?.close();
  await harness?.close();
});

/** An MCP tool call that must succeed; its answer (snake_case), read loosely. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function agentCall(name: string, args: Record<string, unknown>): Promise<Record<string, any>> {
  const result = await client.callTool({ name, arguments: args });
  const text = (result.content as { text: string }[])[0]!.text;
  expect(result.isError, text).toBeFalsy();
  return JSON.parse(text) as Record<string, unknown>;
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

  it("with failing files: one agent task per file, each in run.get with its group and file; the release notes skipped", async () => {
    await fs.mkdir(path.join(harness.workspace, FAILING), { recursive: true });
    for (const file of ["math.test.ts", "strings.test.ts"]) {
      await fs.writeFile(path.join(harness.workspace, FAILING, file), "failed\n");
    }
    const { runId } = await harness.caller.plans.approve({ planId, version: 1 });

    const first = await harness.waitForStep(runId, "step_2[0]", "awaiting_agent");
    const second = await harness.waitForStep(runId, "step_2[1]", "awaiting_agent");
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

    // The agent reports each file fixed (what its session's `update` does); then the group is done.
    await updateAgentTasks(harness.app.engine, {
      runId,
      actor: "release-agent",
      updates: [
        { stepId: "step_2[0]", status: "DONE", note: "fixed math" },
        { stepId: "step_2[1]", status: "DONE", note: "fixed strings" },
      ],
    });
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    const steps = await stepsOf(runId);
    expect(steps.get("step_2")!.status).toBe("completed");
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
