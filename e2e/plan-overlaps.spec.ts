import { expect, test } from "@playwright/test";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";

// Steps 3 and 5 depend on nothing between them and both name README.md: they may run at once.
const plan = {
  goal: "Two tasks on one file",
  steps: [
    { id: "step_3", title: "Reword the intro", tool: "echo", args: { value: "a" }, relevantFilePaths: ["README.md"] },
    { id: "step_4", title: "Unrelated", tool: "echo", args: { value: "b" } },
    {
      id: "step_5",
      title: "Add a usage section",
      tool: "echo",
      args: { value: "c" },
      relevantFilePaths: ["./README.md"],
    },
  ],
};

test("the plan page warns about parallel steps on the same file and adds the dependency in one click", async ({
  page,
  request,
}) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  await view.expectVersion(1);
  const warnings = page.getByTestId("overlap-warnings");
  await expect(warnings).toContainText("Tasks 3 and 5 may run at the same time and both touch README.md");

  await warnings.getByRole("button", { name: "Add dependency 5 → 3" }).click();
  await view.expectVersion(2);
  await expect(warnings).toHaveCount(0);
  await expect(view.notice()).toContainText("Saved as version 2");
  // Stored as a new version: step 5 now depends on step 3 after a reload too.
  await page.reload();
  await view.expectVersion(2);
  await expect(page.getByTestId("overlap-warnings")).toHaveCount(0);
  await expect(view.step("step_5")).toContainText(/Depends on\s*step_3/);
});
