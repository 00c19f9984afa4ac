import { expect, test } from "@playwright/test";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";

/** Plan templates: saved from a plan page, started from /templates with a parameter, deleted. */
const tag = Date.now().toString(36);

test("save a plan as a template, start a plan from it with a parameter, delete it", async ({ page }) => {
  const planId = await createPlanViaApi(page.request, {
    goal: `Deploy {{service}} ${tag}`,
    steps: [
      { id: "step_1", description: "Announce {{service}}", tool: "echo", args: { value: "deploying {{service}}" } },
    ],
  });
  const view = new PlanViewPage(page);
  await view.open(planId);
  await page.getByRole("button", { name: "Save as template" }).click();
  const form = page.getByRole("form", { name: /Save version 1 as a template/ });
  await expect(form.getByTestId("template-parameter")).toHaveAttribute("data-name", "service");
  await form.getByLabel("Template name").fill(`Deploy template ${tag}`);
  await form.getByLabel("Label of service").fill("Service name");
  await form.getByRole("button", { name: "Save template" }).click();
  await expect(page.getByRole("status").filter({ hasText: "Saved" })).toContainText(
    `Saved “Deploy template ${tag}” as a template with 1 parameter`,
  );

  await page.getByRole("link", { name: "Templates", exact: true }).click();
  await expect(page.getByRole("heading", { level: 1, name: "Templates" })).toBeVisible();
  const card = page.getByTestId("template").filter({ hasText: `Deploy template ${tag}` });
  await card.getByRole("button", { name: "Use template" }).click();
  // Without the required value the server names what is missing.
  await card.getByRole("button", { name: "Create plan" }).click();
  await expect(card.getByRole("alert")).toHaveText("Missing required parameter: Service name (service)");
  await card.getByLabel(/Service name/).fill("billing");
  await card.getByRole("button", { name: "Create plan" }).click();

  await expect(page).toHaveURL(/\/plans\/plan-[0-9a-f]{8}$/);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText(`Deploy billing ${tag}`);
  await expect(page.getByText(/source template/)).toBeVisible();
  await expect(view.step("step_1")).toContainText("Announce billing");
  expect(page.url()).not.toContain(planId);

  await page.goto("/templates");
  await card.getByRole("button", { name: "Delete" }).click();
  await card.getByRole("button", { name: "Delete for good" }).click();
  await expect(card).toHaveCount(0);
});

test("the recovery choice in Run options reaches the run", async ({ page }) => {
  const planId = await createPlanViaApi(page.request, {
    goal: `Recover by policy ${tag}`,
    steps: [{ id: "step_1", description: "Say hi", tool: "echo", args: { value: "hi" } }],
  });
  const view = new PlanViewPage(page);
  await view.open(planId);
  await page.getByText(/^Run options:/).click();
  await page.getByLabel("When a step fails").selectOption("auto");
  await expect(page.getByText(/^Run options: .* · recovery automatic$/)).toBeVisible();
  await page.getByRole("button", { name: /Approve and run/ }).click();
  await expect(page).toHaveURL(/\/runs\//);
  await expect(page.getByTestId("recovery-policy")).toContainText("automatic");
});
