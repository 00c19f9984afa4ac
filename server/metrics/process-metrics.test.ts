import { describe, expect, it } from "vitest";
import { observeQueueLatency, observeStepDuration, processMetrics } from "./process-metrics";

describe("this process's step metrics", () => {
  it("counts each step attempt by tool and outcome, and each job's wait in the queue from when it was due", async () => {
    const { registry } = processMetrics();
    observeStepDuration("shell", false, 1_500);
    observeQueueLatency(new Date(Date.now() - 3_000));
    // A job due later than now (a clock step between hosts) counts as no wait, never a negative one.
    observeQueueLatency(new Date(Date.now() + 60_000));
    const text = await registry.metrics();
    expect(text).toMatch(/^stepwise_step_duration_seconds_bucket\{le="1",tool="shell",outcome="failed"\} 0$/m);
    expect(text).toMatch(/^stepwise_step_duration_seconds_bucket\{le="2.5",tool="shell",outcome="failed"\} 1$/m);
    expect(text).toMatch(/^stepwise_step_queue_latency_seconds_bucket\{le="0.005"\} 1$/m);
    expect(text).toMatch(/^stepwise_step_queue_latency_seconds_bucket\{le="2.5"\} 1$/m);
    expect(text).toMatch(/^stepwise_step_queue_latency_seconds_bucket\{le="5"\} 2$/m);
    expect(processMetrics()).toBe(processMetrics());
  });
});
