import { expect, test } from "@playwright/test";
import { goodPlan } from "../tests/planner-fixtures";
import { startScriptedLlm, type ChatRequest, type ScriptedLlm, type ScriptedReply } from "../tests/scripted-llm";
import { NewTaskPage } from "./pages/planner-pages";
import { E2E_LLM_PORT } from "./e2e-env";

/** Same port as playwright.config.ts gives the app under test as its OpenAI-compatible provider. */

let llm: ScriptedLlm;
test.beforeAll(async () => {
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
});
test.afterAll(async () => {
  await llm?.close();
});
test.beforeEach(() => llm.reset());

const MESSAGE = "Mention the licence as well";

test("seed 002: a message the person adds while the planner gathers reaches its next model call", async ({ page }) => {
  let sent = false;
  // The model keeps gathering (one read-only call per turn, each answered within the call timeout)
  // until a request carries the person's message; then it submits a plan that takes it in.
  const turn = async (request: ChatRequest): Promise<ScriptedReply> => {
    const deadline = Date.now() + 1_500;
    while (!sent && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    if (JSON.stringify(request.messages).includes(MESSAGE)) {
      return {
        toolCalls: [{ name: "submit_plan", arguments: { ...goodPlan, summary: `${goodPlan.summary} ${MESSAGE}.` } }],
      };
    }
    return { toolCalls: [{ name: "list_dir", arguments: { path: "." } }] };
  };
  llm.script(...Array.from({ length: 20 }, () => turn));

  const newTask = new NewTaskPage(page);
  await newTask.open();
  const session = await newTask.plan("Show the README", { mode: "deep" });
  await expect.poll(() => llm.requests.length).toBeGreaterThanOrEqual(1);
  await session.expectStatus("running");

  const form = page.getByRole("form", { name: "Message to the planner" });
  await form.getByLabel("Add a message for the planner").fill(MESSAGE);
  await form.getByRole("button", { name: "Send message" }).click();
  await expect(page.getByRole("list", { name: "Your messages to the planner" })).toContainText(MESSAGE);
  sent = true;

  await session.expectStatus("completed");
  await expect(session.progress()).toContainText(`added: ${MESSAGE}`);
  const carrying = llm.requests.findIndex((request) => JSON.stringify(request.messages).includes(MESSAGE));
  expect(carrying).toBeGreaterThan(0);
  await expect(page.getByRole("list", { name: "Your messages to the planner" })).toContainText("the planner has it");
  await session.reviewPlan();
  await expect(page.getByText(`${goodPlan.summary} ${MESSAGE}.`)).toBeVisible();
});
