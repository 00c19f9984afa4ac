import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";

/**
 * Issue 40 through seed 002's door: an agent's `submit_plan` says "run the tests and list the
 * failing files; fix each failing file; if none failed, write the release notes" with `for_each`
 * and `when` on its steps. The same plan-time checks as plan_create refuse what cannot be read,
 * the review says the branches in words, a resubmission keeps them pointing at the right steps,
 * and once approved the agent's own loop lists the files with DONE and gets one task per file.
 */
const AGENT_TOKEN = "plan-mode-branching-token";
let harness: Harness;
let api: Awaited<ReturnType<typeof startApiServer>>;
let client: Client;

beforeAll(async () => {
  harness = await startHarness();
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN });
  client = new Client({ name: "plan-mode-branching", version: "1.0.0" });
  await client.connect(
    new StreamableHTTPClientTransport(new URL("/api/mcp", api.url), {
      requestInit: { headers: { authorization: `Bearer ${AGENT_TOKEN}`, "x-stepwise-agent": "fixer" } },
    }),
  );
}, 120_000);
afterAll(async () => {
  await client?.close().catch(() => undefined);
  await api?.close();
  await harness?.close();
});

async function call(name: string, args: Record<string, unknown>) {
  const result = await client.callTool({ name, arguments: args });
  return { isError: result.isError === true, text: (result.content as { text: string }[])[0]!.text };
}
// eslint-disable-next-line @typescript-eslint/no-explicit-any
async function ok(name: string, args: Record<string, unknown> = {}): Promise<Record<string, any>> {
  const result = await call(name, args);
  expect(result.isError, result.text).toBe(false);
  return JSON.parse(result.text) as Record<string, unknown>;
}

const RUN_TESTS = {
  description: "Run the tests and report the failing test files as the task's items",
  tools: ["shell"],
  risk: "low",
};
const FIX = { description: "Fix the failing test file", tools: ["edit"], risk: "medium" };
const NOTES = { description: "Write the release notes", tools: ["edit"], risk: "low" };

describe("submit_plan with conditions and fan-out", () => {
  let planId: string;

  it("refuses what cannot be read, with the same checks as plan_create; the review says the branches", async () => {
    await ok("enter_plan_mode", { reason: "Fixing failing tests touches many files" });
    const notAList = await call("submit_plan", {
      summary: "Fix the tests",
      steps: [RUN_TESTS, { ...FIX, for_each: "$step_1.note" }],
    });
    expect(notAList.isError).toBe(true);
    expect(notAList.text).toContain("$step_1.note is");
    expect(notAList.text).toContain("not a list");
    const noField = await call("submit_plan", {
      summary: "Fix the tests",
      steps: [RUN_TESTS, { ...NOTES, when: "$step_1.files.length == 0" }],
    });
    expect(noField.isError).toBe(true);
    expect(noField.text).toContain('has no field \\"files\\"');

    const submitted = await ok("submit_plan", {
      summary: "Fix each failing test file; if none fail, write the release notes",
      steps: [
        RUN_TESTS,
        { ...FIX, for_each: "$step_1.items", max_items: 20 },
        { ...NOTES, when: "$step_1.items.length == 0" },
      ],
    });
    planId = submitted.plan_id as string;
    const assessments = await harness.caller.plans.assessments({ planId, version: 1 });
    expect(assessments.step_3!.conditionWords).toBe("the number of step_1's items is 0");
    const markdown = (await harness.caller.plans.export({ planId, format: "markdown" })).content;
    expect(markdown).toContain(
      "- Runs once for each element of `$step_1.items` (`$item` in its arguments), at most 20",
    );
  });

  it("a resubmission keeps each branch reading the step it named", async () => {
    await harness.caller.plans.review({
      planId,
      version: 1,
      decision: "request_changes",
      comment: "Say which tests in the first step",
    });
    const revised = await ok("submit_plan", {
      summary: "Fix each failing test file; if none fail, write the release notes",
      steps: [
        { ...RUN_TESTS, description: "Run the unit tests and report the failing test files as the task's items" },
        { ...FIX, for_each: "$step_1.items", max_items: 20 },
        { ...NOTES, when: "$step_1.items.length == 0" },
      ],
    });
    expect(revised.version).toBe(2);
    const plan = await harness.caller.plans.get({ planId, version: 2 });
    expect(plan.plan.steps.map((step) => [step.id, step.forEach, step.when])).toEqual([
      ["step_1", undefined, undefined],
      ["step_2", "$step_1.items", undefined],
      ["step_3", undefined, "$step_1.items.length == 0"],
    ]);
  });

  it("once approved, the agent lists the failing files with DONE and gets one task per file", async () => {
    const { runId } = await harness.caller.plans.approve({ planId, version: 2 });
    const handed: { id: number; instance?: number; item?: unknown }[] = [];
    const deadline = Date.now() + 60_000;
    for (;;) {
      const status = await ok("status");
      const reason = status.now.reason as string;
      if (reason === "plan_completed") break;
      if (reason === "ready_for_task") {
        const task = status.now.current_task;
        handed.push({ id: task.id, ...(task.instance !== undefined && { instance: task.instance, item: task.item }) });
        const ref = { id: task.id, ...(task.instance !== undefined && { instance: task.instance }) };
        const done = task.id === 1 ? { items: ["math.test.ts", "strings.test.ts"] } : {};
        await ok("update", { payload: { update_tasks: [{ ...ref, status: "DONE", notes: "done", ...done }] } });
        continue;
      }
      expect(["sync_instructions", "waiting"]).toContain(reason);
      if (Date.now() > deadline) throw new Error(`The loop did not finish: ${JSON.stringify(status)}`);
      if (reason === "waiting") await new Promise((resolve) => setTimeout(resolve, 100));
    }
    expect(handed).toEqual([
      { id: 1 },
      { id: 2, instance: 0, item: "math.test.ts" },
      { id: 2, instance: 1, item: "strings.test.ts" },
    ]);
    const run = await harness.waitForRun(runId);
    expect(run.status).toBe("completed");
    const notes = (run.steps as { stepId: string; status: string; reason?: string | null }[]).find(
      (step) => step.stepId === "step_3",
    );
    expect(notes).toMatchObject({ status: "skipped", reason: "Condition not met: the number of step_1's items is 0" });
  });
});
