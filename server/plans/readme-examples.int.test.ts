import fs from "node:fs";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { planExamples } from "../../tests/doc-examples";

let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

/** The README's example whose shell step's output a later step writes to a file. */
function shellToFileExample(): { id: string; tool: string; args: Record<string, unknown> }[] {
  const readme = fs.readFileSync(path.resolve(__dirname, "../../README.md"), "utf8");
  const example = planExamples(readme).find(
    (candidate): candidate is { id: string; tool: string; args: Record<string, unknown> }[] =>
      Array.isArray(candidate) &&
      candidate.some((step) => step.tool === "shell") &&
      candidate.some((step) => step.tool === "write_file"),
  );
  if (!example) throw new Error("README.md has no plan example with a shell step and a write_file step");
  return example;
}

describe("the README's shell → write_file example", () => {
  it("runs as written: the file holds the command's standard output", async () => {
    const steps = shellToFileExample();
    harness = await startHarness();
    fs.writeFileSync(path.join(harness.workspace, "hello.txt"), "hi\n");
    const plan = await harness.caller.plans.createFromJson({ planJson: JSON.stringify({ goal: "Readme", steps }) });
    const { runId } = await harness.caller.plans.approve({ planId: plan.id, version: plan.version });
    for (;;) {
      const run = await harness.waitForRun(runId, ["completed", "failed", "cancelled", "running"]);
      if (run.status !== "running") {
        expect(run.steps.map((step) => [step.stepId, step.status, step.result?.error])).toEqual(
          steps.map((step) => [step.id, "completed", undefined]),
        );
        break;
      }
      // Approve each gate as it opens, as the person reading the README would.
      const gated = run.steps.find((step) => step.status === "awaiting_approval");
      if (gated) await harness.caller.runs.decide({ runId, stepId: gated.stepId, approve: true });
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const written = steps.find((step) => step.tool === "write_file")!.args.path as string;
    expect(fs.readFileSync(path.join(harness.workspace, written), "utf8")).toBe("hello.txt\n");
  });
});
