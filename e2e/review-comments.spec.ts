import { expect, test } from "@playwright/test";
import { goodPlan } from "../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../tests/scripted-llm";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";
import { query, trpc } from "./pages/trpc-api";
import { E2E_LLM_PORT } from "./e2e-env";

/**
 * Review as a conversation in the browser: a person comments on one argument of a step with the
 * keyboard alone, sees the thread answered once a new version changes that argument, resolves it,
 * and sends the open comments to the planner with "Revise from comments".
 */
const tag = Date.now().toString(36);

let llm: ScriptedLlm;
test.beforeAll(async () => {
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
});
test.afterAll(async () => {
  await llm?.close();
});

test("comment on a step's argument with the keyboard, see it answered, resolve it", async ({ page, request }) => {
  const planId = await createPlanViaApi(request, {
    goal: `Comment here ${tag}`,
    steps: [
      { id: "step_1", description: "Say one", tool: "echo", args: { value: 1 } },
      { id: "step_2", description: "Say two", tool: "echo", args: { value: 2 }, dependsOn: ["step_1"] },
    ],
  });
  const view = new PlanViewPage(page);
  await view.open(planId);
  const card = view.step("step_2");
  const toggle = card.getByRole("button", { name: "Comment on step_2" });
  await toggle.focus();
  await page.keyboard.press("Enter");
  const form = card.getByRole("form", { name: "New comment on step_2" });
  await form.getByLabel("What should happen").focus();
  await form.getByLabel("What should happen").selectOption("change");
  await form.getByLabel("About").selectOption("args.value");
  await form.getByRole("textbox", { name: "Comment on step_2" }).focus();
  await page.keyboard.type("Say three instead");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");

  const thread = card.locator("[data-comment-id]");
  await expect(thread).toHaveCount(1);
  await expect(thread).toContainText("Change this");
  await expect(thread).toContainText("args.value");
  await expect(thread).toContainText("Say three instead");
  await expect(card.getByRole("button", { name: "Comments (1 open) on step_2" })).toBeVisible();
  await expect(page.getByTestId("comments-waiting")).toHaveText("1 comment waiting for an answer");

  // A new version that changes the value answers the comment; resolving closes the thread.
  await trpc(request, "plans.edit", {
    planId,
    baseVersion: 1,
    edit: { kind: "updateStep", stepId: "step_2", changes: { args: { value: 3 } } },
  });
  await page.reload();
  await view
    .step("step_2")
    .getByRole("button", { name: /Comments \(1 open\) on step_2/ })
    .click();
  const answered = view.step("step_2").locator("[data-comment-id]");
  await expect(answered.getByTestId("answered")).toHaveText("answered in v2");
  await answered.getByRole("button", { name: "Resolve" }).click();
  await expect(answered).toContainText("resolved by");
  await expect(view.step("step_2").getByRole("button", { name: /Comments \(0 open, 1 resolved\)/ })).toBeVisible();
});

test("Revise from comments sends the open comments to the planner and opens its session", async ({ page, request }) => {
  llm.reset();
  llm.script({ json: goodPlan });
  const { sessionId: first } = await trpc<{ sessionId: string }>(request, "planner.start", {
    goal: `Revise me ${tag}`,
    mode: "quick",
  });
  await expect
    .poll(async () => (await query<{ status: string }>(request, "planner.session", { sessionId: first })).status)
    .toBe("completed");
  const { planId } = await query<{ planId: string }>(request, "planner.session", { sessionId: first });

  const view = new PlanViewPage(page);
  await view.open(planId);
  const panel = page.getByRole("region", { name: "Review comments" });
  await expect(panel.getByRole("button", { name: "Revise from comments" })).toBeDisabled();
  await panel.getByRole("textbox", { name: "Comment on the plan" }).fill("Also check the licence file");
  await panel.getByRole("button", { name: "Add comment" }).click();
  await expect(panel.locator("[data-comment-id]")).toContainText("Also check the licence file");

  llm.script({ json: goodPlan });
  await panel.getByRole("button", { name: "Revise from comments" }).click();
  await expect(page).toHaveURL(/\/tasks\//);
  await expect.poll(() => llm.requests.length).toBeGreaterThanOrEqual(2);
  expect(JSON.stringify(llm.requests.at(-1))).toContain("On the whole plan — comment: Also check the licence file");
});
