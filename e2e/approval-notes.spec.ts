import { expect, test } from "@playwright/test";
import { PlanViewPage } from "./pages/plan-pages";
import { trpc } from "./pages/trpc-api";

/**
 * Approving with a note, in the browser: the plan's approval and a gate's decision each carry the
 * person's words, shown on the run page. And deciding from elsewhere: a decision link opened in a
 * browser that never signed in shows what would run and decides once.
 */
async function gatedPlan(request: Parameters<typeof trpc>[0], goal: string) {
  return trpc<{ id: string; version: number }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal,
      steps: [
        { id: "step_1", description: "Write the marker", tool: "shell", args: { command: "echo hi > marker.txt" } },
      ],
    }),
  });
}

test("approving a plan and a gate with notes shows each note on the run page", async ({ page, request }) => {
  const plan = await gatedPlan(request, `Notes ${Date.now()}`);
  const view = new PlanViewPage(page);
  await view.open(plan.id);
  await page.getByLabel("Note with the approval (optional)").fill("Only touch marker.txt, nothing else.");
  const run = await view.approve();
  await expect(page.getByTestId("approval-note")).toHaveText("“Only touch marker.txt, nothing else.”");

  await run.decide("step_1", true, "Checked the command.");
  await expect(run.step("step_1").getByTestId("decision")).toHaveText("Approved by user: “Checked the command.”");
  await run.expectRunStatus("completed");
});

test("a decision link opened without signing in shows what would run and decides once", async ({
  browser,
  request,
}) => {
  const plan = await gatedPlan(request, `Link ${Date.now()}`);
  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", { planId: plan.id, version: plan.version });
  let link: { url: string } | undefined;
  await expect(async () => {
    link = await trpc<{ url: string }>(request, "runs.createDecisionLink", { runId, stepId: "step_1" });
  }).toPass({ timeout: 60_000 });

  // A phone: no session cookie at all.
  const phone = await browser.newContext({ storageState: { cookies: [], origins: [] } });
  const page = await phone.newPage();
  await page.goto(link!.url);
  await expect(page.getByRole("heading", { name: "Decide: step_1" })).toBeVisible();
  await expect(page.locator("pre")).toContainText('"command": "echo hi > marker.txt"');
  await expect(page.getByText("Risk (computed)")).toBeVisible();
  await page.getByLabel("Note (optional, kept with the decision)").fill("From my phone.");
  await page.getByRole("button", { name: "Approve" }).click();
  await expect(page.getByRole("status")).toHaveText("Approved as user.");

  // Used: the page now refuses, and the signed-in person sees the decision with its note.
  await page.reload();
  await expect(page.getByRole("alert")).toContainText("already used");
  // Nothing else opens without signing in.
  await page.goto(`/runs/${runId}`);
  await expect(page).toHaveURL(/\/sign-in$/);
  await phone.close();
});
