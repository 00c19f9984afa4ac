import { expect, test } from "@playwright/test";
import { startScriptedLlm, type ScriptedLlm } from "../tests/scripted-llm";
import { E2E_LLM_PORT } from "./e2e-env";
import { RunViewPage, startRunViaApi } from "./pages/run-pages";

/** An llm_generate step in a real run: the model's text is its result, its usage is on its card. */
let llm: ScriptedLlm;

test.beforeAll(async () => {
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
});
test.afterAll(async () => {
  await llm.close();
});

test("an llm_generate step shows the model's text and the call's tokens on its card", async ({ page }) => {
  llm.script({ text: "Release notes: all good." });
  const runId = await startRunViaApi(page.request, "Write release notes", {
    steps: [
      {
        id: "step_1",
        description: "Write the notes",
        tool: "llm_generate",
        args: { prompt: "Write one line of release notes." },
      },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.expectStepStatus("step_1", "completed");
  await expect(run.step("step_1").getByTestId("result")).toContainText("Release notes: all good.");
  await expect(run.step("step_1").getByTestId("step-llm-usage")).toHaveText(
    /^Model compatible:scripted-planner: \d+ tokens in, \d+ out, cost unknown$/,
  );
  expect(llm.requests).toHaveLength(1);
});
