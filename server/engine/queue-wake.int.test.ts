import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { echoTool } from "../tools/echo";
import { builtinTools, createToolRegistry } from "../tools/registry";
import { defineTool, RetryableToolError } from "../tools/types";
import { startStepWorker, type StepWorker } from "./worker";

let harness: Harness | undefined;
let worker: StepWorker | undefined;
afterEach(async () => {
  await worker?.stop({ graceMs: 0 });
  worker = undefined;
  await harness?.close();
  harness = undefined;
});

/** An idempotent data step (echo's properties) whose first attempt fails with a retryable error. */
const flaky = defineTool({
  ...echoTool,
  name: "flaky",
  description: "Fails its first attempt with a retryable error",
  async execute({ value }, context) {
    if (context.attempt === 1) throw new RetryableToolError("not yet");
    return value;
  },
});

describe("delayed step jobs", () => {
  it("a retry is taken when its backoff ends, by a worker that would not poll for ten minutes", async () => {
    harness = await startHarness({ worker: false, tools: createToolRegistry([...builtinTools, flaky]) });
    const h = harness;
    // Idle queue workers poll every ten minutes, and the watchdog that replaces a runner leaving
    // due jobs waiting looks every minute and waits three: only the wake at the retry's due time
    // (the worker's queue alarm) can start the retry before the backstop below.
    worker = await startStepWorker(h.app.engine, {
      databaseUrl: h.app.db.url,
      concurrency: 2,
      heartbeatMs: 60_000,
      queuePollIntervalMs: 600_000,
    });
    const plan = await h.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "retry after a short backoff",
        steps: [
          {
            id: "step_1",
            description: "flaky",
            tool: "flaky",
            args: { value: 1 },
            retry: { maxAttempts: 2, backoffMs: 100 },
          },
        ],
      }),
    });
    const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
    const run = await h.waitForRun(runId, ["completed", "failed"], 60_000);
    expect(run.status).toBe("completed");
    expect(run.steps[0]!.attempt).toBe(2);
    const events = await readEvents(h.app.db.pool, runId, 0);
    expect(events.filter((e) => e.type === "step.retrying")).toHaveLength(1);
  });
});
