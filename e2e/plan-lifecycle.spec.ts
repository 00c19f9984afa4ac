import { expect, test } from "@playwright/test";
import { NewPlanPage, PlanViewPage } from "./pages/plan-pages";

const fanOutFanIn = {
  steps: [
    { id: "step_1", description: "List the workspace", tool: "list_dir", args: { path: "." } },
    { id: "step_2", description: "Slow branch", tool: "sleep", args: { ms: 6000 }, dependsOn: ["step_1"] },
    { id: "step_3", description: "Fast branch", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    { id: "step_4", description: "Join", tool: "echo", args: { value: "done" }, dependsOn: ["step_2", "step_3"] },
  ],
};

test("a plan is created, approved and watched live until every step completes", async ({ page }) => {
  const newPlan = new NewPlanPage(page);
  await newPlan.open();
  await newPlan.create("Fan out and back in", fanOutFanIn);
  await expect(page).toHaveURL(/\/plans\/plan-[0-9a-f]{8}$/);

  const plan = new PlanViewPage(page);
  await expect(plan.step("step_4")).toContainText("Join");
  await expect(plan.step("step_3")).toContainText("$step_1");

  const run = await plan.approve();
  // Live states arrive without reloads: count document loads from here on.
  const loads: string[] = [];
  page.on("load", () => loads.push(page.url()));
  // The slow branch is seen running while the fast one has already finished and the join waits:
  // states arrive live. The slow branch sleeps long enough for a busy machine to show that moment.
  await run.expectStepStatuses({ step_2: "running", step_3: "completed", step_4: "pending" });
  for (const id of ["step_1", "step_2", "step_3", "step_4"]) await run.expectStepStatus(id, "completed");
  await expect(run.run()).toHaveAttribute("data-run-status", "completed");
  expect(loads).toEqual([]);

  // The plan page lists the run and leads back to it.
  await page.getByRole("link", { name: /Fan out and back in/ }).click();
  await expect(page.getByRole("region", { name: "Runs of this plan" })).toContainText("completed");
});

test("an invalid plan shows its problems next to the offending steps and stores nothing", async ({ page }) => {
  const newPlan = new NewPlanPage(page);
  await newPlan.open();
  await newPlan.create("Broken plan", {
    steps: [
      { id: "step_1", description: "a", tool: "echo", args: { value: 1 }, dependsOn: ["step_2"] },
      { id: "step_2", description: "b", tool: "echo", args: { value: 2 }, dependsOn: ["step_1"] },
      { id: "step_3", description: "c", tool: "no_such_tool", args: {} },
      { id: "step_4", description: "d", tool: "sleep", args: { ms: "soon" } },
    ],
  });
  await expect(page.getByRole("alert").first()).toContainText("nothing was saved");
  await expect(newPlan.stepIssues("step_1")).toContainText(/Circular dependency/);
  await expect(newPlan.stepIssues("step_2")).toContainText(/Circular dependency/);
  await expect(newPlan.stepIssues("step_3")).toContainText("Unknown tool: no_such_tool");
  await expect(newPlan.stepIssues("step_4")).toContainText("args.ms");
  await expect(page).toHaveURL(/\/plans\/new$/);

  await newPlan.create("Broken JSON", "{ not json");
  await expect(page.getByRole("alert").first()).toContainText("Malformed JSON");

  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Plans" })).toBeVisible();
  await expect(page.getByText(/^Broken (plan|JSON)$/)).toHaveCount(0);
});

test("run options next to Approve set how many steps run at once and how long gates wait", async ({ page }) => {
  const newPlan = new NewPlanPage(page);
  await newPlan.open();
  const sleeper = (id: string) => ({
    id,
    description: `Sleep ${id}`,
    tool: "sleep",
    args: { ms: 5000 },
    dependsOn: ["step_0"],
  });
  await newPlan.create("Two at a time", {
    steps: [
      { id: "step_0", description: "Gate", tool: "echo", args: { value: 1 }, approvalRequired: true },
      sleeper("step_1"),
      sleeper("step_2"),
      sleeper("step_3"),
    ],
  });
  const plan = new PlanViewPage(page);
  await expect(plan.step("step_3")).toContainText("Sleep step_3");
  await page.getByText(/^Run options: up to 8 steps at once · gates wait 30 min$/).click();
  await page.getByLabel("Steps at once").fill("2");
  await page.getByLabel("Gates wait (minutes)").fill("10");
  await page.getByLabel("Warn before (minutes)").fill("20");
  // A warning after the deadline cannot be sent: said, and Approve waits for a fix.
  await expect(page.getByTestId("run-options-problem")).toHaveText(
    "The warning must come before the approval time runs out.",
  );
  await expect(page.getByRole("button", { name: /Approve and run/ })).toBeDisabled();
  await page.getByLabel("Warn before (minutes)").fill("2");
  await expect(page.getByText("Run options: up to 2 steps at once · gates wait 10 min")).toBeVisible();

  const run = await plan.approve();
  await expect(page.getByTestId("max-parallel")).toHaveText("up to 2 steps");
  await expect(run.pendingItem("step_0").getByTestId("time-left")).toContainText(/^(9|10) min/);
  // The sleepers start only now, with the page live: never more than two of the three at once.
  await run.decide("step_0", true);
  await expect(run.count("running")).toHaveAttribute("data-count", "2");
  // Ready, not running: its dependency is done, and it waits for a free place.
  await run.expectStepStatus("step_3", "ready");
  await run.expectRunStatus("completed");
});
