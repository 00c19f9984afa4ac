import { expect, test } from "@playwright/test";
import { PlanViewPage } from "./pages/plan-pages";
import { RunViewPage } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";

/**
 * A sub-plan in the browser: the review shows what the `run_plan` step will run (the child plan's
 * goal and steps, its own gates marked), the run page follows the parent step while its child
 * run goes, links to the child, and the child's page links back; the child's gate is decided in
 * the child.
 */
test("a sub-plan step shows its child plan in the review, and the run links parent and child", async ({
  page,
  request,
}) => {
  const stamp = Date.now();
  const child = await trpc<{ id: string; version: number }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal: `Release notes ${stamp}`,
      steps: [
        { id: "step_1", title: "Draft the notes", description: "Draft", tool: "echo", args: { value: "notes" } },
        {
          id: "step_2",
          title: "Publish the notes",
          description: "Publish",
          tool: "echo",
          args: { value: "published" },
          dependsOn: ["step_1"],
          approvalRequired: true,
        },
      ],
    }),
  });
  const parent = await trpc<{ id: string; version: number }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal: `Ship ${stamp}`,
      steps: [
        { id: "step_1", description: "Run the tests", tool: "echo", args: { value: "green" } },
        {
          id: "step_2",
          description: "Open the release notes sub-plan",
          tool: "run_plan",
          args: { plan_id: child.id, version: child.version },
          dependsOn: ["step_1"],
        },
      ],
    }),
  });

  const view = new PlanViewPage(page);
  await view.open(parent.id);
  const preview = view.step("step_2").getByTestId("sub-plan-preview");
  await expect(preview).toContainText(`Runs “Release notes ${stamp}”, version 1, as a child run`);
  await expect(preview.getByRole("listitem")).toHaveText([
    "Draft the notes (echo)",
    "Publish the notes (echo) needs its own approval",
  ]);

  const run = await view.approve();
  await run.decide("step_2", true);
  const waiting = run.step("step_2").getByTestId("child-run-state");
  await expect(waiting).toContainText("Waiting for its sub-plan", { timeout: 60_000 });

  await waiting.getByRole("link", { name: "the child run" }).click();
  const childRun = new RunViewPage(page);
  await expect(page.getByText("Sub-plan of")).toBeVisible();
  await childRun.decide("step_2", true);
  await childRun.expectRunStatus("completed");

  await page.getByRole("link", { name: "step step_2 of its parent run" }).click();
  await run.expectRunStatus("completed");
  await run.expectStepStatus("step_2", "completed");
});
