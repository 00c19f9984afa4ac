import { expect, test } from "@playwright/test";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";

// step_1 ← step_2 ← step_4 (step_4 reads step_2's output); step_3 independent.
const plan = {
  goal: "Review and edit",
  steps: [
    { id: "step_1", description: "List the workspace", tool: "list_dir", args: { path: "." } },
    { id: "step_2", description: "Wait a moment", tool: "sleep", args: { ms: 100 }, dependsOn: ["step_1"] },
    { id: "step_3", description: "Say hello", tool: "echo", args: { value: "hello" } },
    { id: "step_4", description: "Pass it on", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
  ],
};

let view: PlanViewPage;
test.beforeEach(async ({ page, request }) => {
  view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  await view.expectVersion(1);
});

test("title and description are edited as a new version", async ({ page }) => {
  const editor = await view.edit("step_3");
  await editor.getByLabel("Title").fill("Greet");
  await editor.getByLabel("Description").fill("Say hello to the reviewer");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await expect(view.editor("step_3")).toHaveCount(0);
  await view.expectVersion(2);
  await expect(view.step("step_3")).toContainText("Greet");
  await expect(view.step("step_3")).toContainText("Say hello to the reviewer");
  await expect(view.notice()).toContainText("Saved as version 2");
  // It survives a reload: it is stored, not only shown.
  await page.reload();
  await expect(view.step("step_3")).toContainText("Greet");
});

test("arguments are edited in the generated form; an invalid value is shown inline and nothing is saved", async () => {
  const editor = await view.edit("step_2");
  const ms = view.arg(editor, "ms");
  await ms.getByRole("textbox", { name: /ms/ }).fill("-5");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await expect(ms).toContainText("Must be at least 0");
  await expect(ms.getByRole("textbox", { name: /ms/ })).toHaveAttribute("aria-invalid", "true");
  await view.expectVersion(1);

  await ms.getByRole("textbox", { name: /ms/ }).fill("250");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  await expect(view.step("step_2")).toContainText('"ms": 250');
});

test("step references are offered only for dependencies, and the server's refusal shows inline in raw JSON", async () => {
  const editor = await view.edit("step_4");
  const picker = view.arg(editor, "value").getByRole("combobox", { name: "Use a step's output for value" });
  await expect(picker.getByRole("option")).toHaveText(["Enter a value instead", "Output of step_2"]);

  await editor.getByRole("button", { name: "Raw JSON" }).click();
  const raw = editor.getByLabel("Arguments as JSON");
  await raw.fill("{ not json");
  await expect(editor.getByRole("alert").filter({ hasText: "Not valid JSON" })).toBeVisible();
  // step_3 is not a dependency of step_4: only the server knows the whole graph and refuses it.
  await raw.fill('{ "value": "$step_3" }');
  await editor.getByRole("button", { name: "Save changes" }).click();
  await expect(editor.getByTestId("editor-refusal")).toContainText("not one of its dependencies");
  await expect(editor).toContainText("value: $step_3 refers to step_3");
  await view.expectVersion(1);
});

test("a dependency that would make a cycle is refused with the cycle named", async () => {
  const editor = await view.edit("step_1");
  await editor.getByRole("checkbox", { name: /step_4/ }).check();
  await editor.getByRole("button", { name: "Save changes" }).click();
  await expect(editor.getByTestId("editor-refusal")).toContainText(
    "Circular dependency: step_1 → step_2 → step_4 → step_1",
  );
  await expect(editor.getByTestId("dependency-error")).toContainText("Circular dependency");
  await view.expectVersion(1);

  // An acceptable dependency is saved, and the step moves below its new dependency.
  await editor.getByRole("checkbox", { name: /step_4/ }).uncheck();
  await editor.getByRole("checkbox", { name: /step_3/ }).check();
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  expect(await view.order()).toEqual(["step_3", "step_1", "step_2", "step_4"]);
});

test("approval, critical, timeout, retry policy and risk are edited", async () => {
  const editor = await view.edit("step_3");
  await editor.getByLabel("Requires approval").check();
  await editor.getByLabel(/Critical/).check();
  await editor.getByLabel("Timeout (seconds)").fill("45");
  await editor.getByLabel("Retry: attempts").fill("5");
  await editor.getByLabel("Risk").selectOption("high");
  await editor.getByLabel("Type").selectOption("test");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  const card = view.step("step_3");
  await expect(card).toContainText("Requires approval");
  await expect(card).toContainText("Critical");
  await expect(card).toContainText("high risk");
  await expect(card).toContainText("timeout 45 s · up to 5 attempts");
  await expect(card).toContainText("test");
});

test("a step is skipped and unskipped", async ({ page }) => {
  await page.getByRole("button", { name: "Skip step_3" }).click();
  await expect(view.step("step_3")).toContainText("Skipped by reviewer");
  await view.expectVersion(2);
  await page.getByRole("button", { name: "Unskip step_3" }).click();
  await view.expectVersion(3);
  await expect(view.step("step_3")).not.toContainText("Skipped by reviewer");
});

test("a step is added at a chosen position with the tool picker", async ({ page }) => {
  await page.getByRole("button", { name: "Add step" }).click();
  const editor = page.getByRole("form", { name: "Add a step" });
  await editor.getByLabel("Position").selectOption("1");
  await editor.getByLabel("Tool").selectOption("echo");
  await editor.getByLabel("Description").fill("Report the listing");
  await editor.getByRole("checkbox", { name: /step_1/ }).check();
  await view
    .arg(editor, "value")
    .getByRole("combobox", { name: /Use a step's output/ })
    .selectOption("step_1");
  await editor.getByRole("button", { name: "Add step" }).click();
  await view.expectVersion(2);
  expect(await view.order()).toEqual(["step_1", "step_5", "step_2", "step_3", "step_4"]);
  await expect(view.step("step_5")).toContainText('"value": "$step_1"');
});

test("deleting a step others depend on asks to remove those links first", async ({ page }) => {
  await page.getByRole("button", { name: "Delete step_2" }).click();
  const confirm = page.getByRole("group", { name: "Confirm deleting step_2" });
  await expect(confirm).toContainText("step_4 depends on step_2. Delete it and remove that link?");
  await confirm.getByRole("button", { name: "Keep" }).click();
  await view.expectVersion(1);

  // step_4 also reads step_2's output, so even a confirmed delete is refused, with the reason.
  await page.getByRole("button", { name: "Delete step_2" }).click();
  await page.getByRole("button", { name: "Delete and unlink" }).click();
  await expect(view.notice()).toContainText("$step_2 refers to unknown step step_2");
  await expect(view.step("step_2")).toBeVisible();
  await view.expectVersion(1);

  await page.getByRole("button", { name: "Delete step_1" }).click();
  await page.getByRole("button", { name: "Delete and unlink" }).click();
  await view.expectVersion(2);
  await expect(view.step("step_1")).toHaveCount(0);
  await expect(view.step("step_2").locator("dd").nth(2)).toHaveText("—");
});

test("goal, summary, success criteria and open questions are edited", async ({ page }) => {
  await page.getByRole("button", { name: "Edit goal, summary and criteria" }).click();
  const form = page.getByRole("form", { name: "Goal and criteria" });
  await form.getByLabel("Goal", { exact: true }).fill("Review, edit and ship");
  await form.getByLabel("Summary").fill("A short plan");
  await form.getByLabel(/Success criteria/).fill("The listing is echoed\nNothing is written");
  await form.getByLabel(/Open questions/).fill("Which folder?");
  await form.getByRole("button", { name: "Save plan details" }).click();
  await view.expectVersion(2);
  await expect(page.getByRole("heading", { level: 1 })).toHaveText("Review, edit and ship");
  await expect(page.getByText("Nothing is written")).toBeVisible();
  await expect(page.getByText("Which folder?")).toBeVisible();
});
