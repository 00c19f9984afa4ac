import fs from "node:fs/promises";
import { axeViolations } from "./pages/accessibility";
import { expect, test } from "@playwright/test";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";

// step_1 ← step_2 ← step_4; step_3 independent.
const plan = {
  goal: "Reorder and review",
  successCriteria: ["Every step completes"],
  steps: [
    { id: "step_1", description: "List the workspace", tool: "list_dir", args: { path: "." } },
    { id: "step_2", description: "Wait a moment", tool: "sleep", args: { ms: 100 }, dependsOn: ["step_1"] },
    { id: "step_3", description: "Say hello", tool: "echo", args: { value: "hello" } },
    { id: "step_4", description: "Pass it on", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
  ],
};

test("a step is reordered with the keyboard only, and screen readers hear where it went", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  // The live region shows only the latest announcement: record every one.
  await page.evaluate(() => {
    const region = document.querySelector("[id^='DndLiveRegion']")!;
    const heard: string[] = [];
    (window as unknown as { heard: string[] }).heard = heard;
    new MutationObserver(() => heard.push(region.textContent ?? "")).observe(region, {
      childList: true,
      characterData: true,
      subtree: true,
    });
  });
  await view.moveWithKeyboard("step_3", -2);
  await view.expectVersion(2);
  const heard = await page.evaluate(() => (window as unknown as { heard: string[] }).heard);
  const distinct = heard.filter((text, i) => text && text !== heard[i - 1]);
  expect(distinct.slice(0, 3)).toEqual([
    "Picked up step_3 at position 3 of 4.",
    "step_3 is over position 2 of 4.",
    "step_3 is over position 1 of 4.",
  ]);
  expect(await view.order()).toEqual(["step_3", "step_1", "step_2", "step_4"]);
  await expect(page.locator("[id^='DndLiveRegion']")).toContainText("step_3 was dropped at position 1");
  await expect(page.locator("[id^='DndLiveRegion']")).not.toContainText("refused");
});

test("the steps come first and stay put while the rest of the page loads", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  const firstStep = view.step("step_1");
  await expect(firstStep).toBeVisible();
  const before = (await firstStep.boundingBox())!.y;
  // The plan's runs and the planner's options load after the plan; neither may push the steps down.
  await expect(page.getByRole("region", { name: "Planner" })).toBeVisible();
  expect((await firstStep.boundingBox())!.y).toBe(before);
  const planner = (await page.getByRole("region", { name: "Planner" }).boundingBox())!;
  expect(planner.y).toBeGreaterThan(before);
  expect(before).toBeLessThan(page.viewportSize()!.height);
  await expect(page.getByText("Loading runs…")).toHaveCount(0);
});

test("a drop above a dependency is refused with the reason, and the list snaps back", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  await view.moveWithKeyboard("step_2", -1);
  await expect(view.notice()).toContainText(
    "Move refused: step_2 cannot move above step_1: it depends on step_1, which must come first.",
  );
  await expect(page.locator("[id^='DndLiveRegion']")).toContainText("Move refused.");
  expect(await view.order()).toEqual(["step_1", "step_2", "step_3", "step_4"]);
  await view.expectVersion(1);

  // The same rule holds for a mouse drop below a dependent. (Mouse drags need both cards on screen.)
  await page.setViewportSize({ width: 1280, height: 1800 });
  await view.dragOnto("step_1", "step_3");
  await expect(view.notice()).toContainText("step_1 cannot move below step_2");
  expect(await view.order()).toEqual(["step_1", "step_2", "step_3", "step_4"]);
  await view.expectVersion(1);

  // And an allowed mouse drop is saved.
  await view.dragOnto("step_3", "step_1");
  await view.expectVersion(2);
  expect(await view.order()).toEqual(["step_3", "step_1", "step_2", "step_4"]);
});

test("two pages editing the same plan never overwrite each other", async ({ browser, request }) => {
  const planId = await createPlanViaApi(request, plan);
  const first = await browser.newPage();
  const second = await browser.newPage();
  const a = new PlanViewPage(first);
  const b = new PlanViewPage(second);
  await a.open(planId);
  await b.open(planId);

  const editorA = await a.edit("step_3");
  await editorA.getByLabel("Description").fill("Changed in the first tab");
  await editorA.getByRole("button", { name: "Save changes" }).click();
  await a.expectVersion(2);

  // The second page still shows version 1; its edit is refused and it shows the newer version.
  await b.expectVersion(1);
  await second.getByRole("button", { name: "Skip step_1" }).click();
  await expect(b.notice()).toHaveAttribute("data-kind", "conflict");
  await expect(b.notice()).toContainText("someone else changed this plan meanwhile (now version 2)");
  await b.expectVersion(2);
  await expect(b.step("step_3")).toContainText("Changed in the first tab");
  await expect(b.step("step_1")).not.toContainText("Skipped by reviewer");

  // Made again on the version it now shows, the edit goes through.
  await second.getByRole("button", { name: "Skip step_1" }).click();
  await b.expectVersion(3);
  await expect(b.step("step_1")).toContainText("Skipped by reviewer");
  await first.close();
  await second.close();
});

test("an edit refused because another tab saved first keeps what the person typed, on top of the newer version", async ({
  browser,
  request,
}) => {
  const planId = await createPlanViaApi(request, plan);
  const [first, second] = [await browser.newPage(), await browser.newPage()];
  const a = new PlanViewPage(first);
  const b = new PlanViewPage(second);
  await a.open(planId);
  await b.open(planId);

  const editorB = await b.edit("step_3");
  await editorB.getByLabel("Description").fill("Typed in the second tab");
  const editorA = await a.edit("step_3");
  await editorA.getByLabel("Title").fill("Title from the first tab");
  await editorA.getByRole("button", { name: "Save changes" }).click();
  await a.expectVersion(2);

  await editorB.getByRole("button", { name: "Save changes" }).click();
  await b.expectVersion(2);
  // Still open, with the typed description, and with the first tab's title (not reverted).
  await expect(editorB.getByTestId("editor-draft")).toBeVisible();
  await expect(editorB.getByLabel("Description")).toHaveValue("Typed in the second tab");
  await expect(editorB.getByLabel("Title")).toHaveValue("Title from the first tab");
  await editorB.getByRole("button", { name: "Save changes" }).click();
  await b.expectVersion(3);
  await expect(b.step("step_3")).toContainText("Title from the first tab");
  await expect(b.step("step_3")).toContainText("Typed in the second tab");
  await first.close();
  await second.close();
});

test("undo restores the previous content as a new version", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  await expect(page.getByRole("button", { name: "Undo last edit" })).toBeDisabled();
  await page.getByRole("button", { name: "Delete step_3" }).click();
  await page.getByRole("button", { name: "Delete", exact: true }).click();
  await view.expectVersion(2);
  await expect(view.step("step_3")).toHaveCount(0);
  await page.getByRole("button", { name: "Undo last edit" }).click();
  await view.expectVersion(3);
  await expect(view.step("step_3")).toContainText("Say hello");
  expect(await view.order()).toEqual(["step_1", "step_2", "step_3", "step_4"]);
});

test("the history lists every version and the diff shows added, removed, reordered and changed fields", async ({
  page,
  request,
}) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  // v2: edit step_2's argument; v3: move step_3 to the top; v4: delete step_4; v5: add a step.
  const editor = await view.edit("step_2");
  await view.arg(editor, "ms").getByRole("textbox", { name: /ms/ }).fill("300");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  await view.moveWithKeyboard("step_3", -2);
  await view.expectVersion(3);
  await page.getByRole("button", { name: "Delete step_4" }).click();
  await page.getByRole("button", { name: "Delete", exact: true }).click();
  await view.expectVersion(4);
  await page.getByRole("button", { name: "Add step" }).click();
  const add = page.getByRole("form", { name: "Add a step" });
  await add.getByLabel("Tool").selectOption("sleep");
  await view.arg(add, "ms").getByRole("textbox", { name: /ms/ }).fill("5");
  await add.getByRole("button", { name: "Add step" }).click();
  await view.expectVersion(5);

  await page.getByRole("button", { name: "History" }).click();
  const rows = page.locator("tr[data-version]");
  await expect(rows).toHaveCount(5);
  await expect(rows.nth(0)).toContainText("Added step_5 (sleep) at position 4");
  await expect(rows.nth(1)).toContainText("Deleted step_4");
  await expect(rows.nth(2)).toContainText("Moved step_3 from position 3 to 1");
  await expect(rows.nth(3)).toContainText("Edited step_2: arguments");
  await expect(rows.nth(4)).toContainText("Created");

  await page.getByLabel("From version").selectOption("1");
  await page.getByLabel("To version").selectOption("5");
  const diff = view.history();
  await expect(diff.getByTestId("diff-added")).toContainText("step_5");
  await expect(diff.getByTestId("diff-removed")).toContainText("step_4");
  await expect(diff.getByTestId("diff-moved")).toContainText("step_3 Say hello: position 3 → 1");
  const msChange = diff.locator("[data-diff-step='step_2'] tr[data-field='args.ms']");
  await expect(msChange.locator(".diff-before")).toHaveText("100");
  await expect(msChange.locator(".diff-after")).toHaveText("300");

  // One version's own changes.
  await page.getByRole("button", { name: "Changes in v2" }).click();
  await expect(diff).toHaveAttribute("aria-label", "Changes from v1 to v2");
  await expect(diff.getByTestId("diff-moved")).toHaveCount(0);
  await expect(diff.getByTestId("diff-changed")).toContainText("args.ms");
});

test("the graph view shows the dependencies; choosing a node opens the same editor", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(
    await createPlanViaApi(request, {
      ...plan,
      steps: [
        ...plan.steps,
        { id: "step_5", tool: "write_file", args: { path: "out.txt", content: "x" }, dependsOn: ["step_4"] },
      ],
    }),
  );
  await page.getByRole("button", { name: "Graph" }).click();
  const graph = page.getByRole("region", { name: "Dependency graph" });
  await expect(graph.locator("[data-graph-step]")).toHaveCount(5);
  await expect(graph.locator(".react-flow__edge")).toHaveCount(3);
  const gated = graph.locator("[data-graph-step='step_5']");
  await expect(gated).toHaveClass(/risk-high/);
  await expect(gated.getByRole("img", { name: "requires approval" })).toBeVisible();
  await expect(graph.locator("[data-graph-step='step_1']")).toHaveClass(/risk-low/);

  // Keyboard: focus the node's button and press Enter.
  await graph.locator("[data-graph-step='step_2']").focus();
  await page.keyboard.press("Enter");
  const editor = view.editor("step_2");
  await expect(editor).toBeVisible();
  await editor.getByLabel("Description").fill("Wait a little longer");
  await editor.getByRole("button", { name: "Save changes" }).click();
  await view.expectVersion(2);
  await expect(graph.locator("[data-graph-step='step_2']")).toContainText("Wait a little longer");
  // Every node of the new version is drawn, not only the one whose size changed.
  for (const id of ["step_1", "step_2", "step_3", "step_4", "step_5"]) {
    await expect(graph.locator(`[data-graph-step='${id}']`)).toBeVisible();
  }

  // Mouse: a click on a node opens its editor too (nodes must take pointer events).
  await expect(editor).toBeHidden();
  await graph.locator("[data-graph-step='step_3']").click();
  await expect(view.editor("step_3")).toBeVisible();
});

test("the plan is exported as JSON and Markdown, and JSON is imported as a new version", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  const [jsonDownload] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Export JSON" }).click(),
  ]);
  expect(jsonDownload.suggestedFilename()).toMatch(/^plan-[0-9a-f]{8}-v1\.json$/);
  const exported = JSON.parse(await fs.readFile((await jsonDownload.path())!, "utf8"));
  expect(exported.steps.map((s: { id: string }) => s.id)).toEqual(["step_1", "step_2", "step_3", "step_4"]);

  const [mdDownload] = await Promise.all([
    page.waitForEvent("download"),
    page.getByRole("button", { name: "Export Markdown" }).click(),
  ]);
  const markdown = await fs.readFile((await mdDownload.path())!, "utf8");
  expect(markdown).toContain("# Reorder and review");
  expect(markdown).toContain("### 3. Say hello (`step_3`)");

  // Import: an invalid file is refused with its problems; a valid one becomes version 2.
  await page.getByRole("button", { name: "Import JSON" }).click();
  const form = page.getByRole("form", { name: "Import a plan from JSON" });
  await form.getByLabel("Or paste JSON").fill(JSON.stringify({ steps: [{ id: "x", tool: "no_such_tool" }] }));
  await form.getByRole("button", { name: "Import as new version" }).click();
  await expect(form.getByRole("alert")).toContainText("The import was refused: 1 problem");
  // Said once, naming the imported step.
  await expect(form.getByRole("alert")).toContainText("x: Unknown tool: no_such_tool");
  await expect(page.getByText(/Unknown tool: no_such_tool/)).toHaveCount(1);
  await view.expectVersion(1);

  exported.steps[2].description = "Say hello, imported";
  await form.getByLabel("JSON file").setInputFiles({
    name: "plan.json",
    mimeType: "application/json",
    buffer: Buffer.from(JSON.stringify(exported)),
  });
  await form.getByRole("button", { name: "Import as new version" }).click();
  await view.expectVersion(2);
  await expect(view.step("step_3")).toContainText("Say hello, imported");
  await expect(page.getByText(/source import/)).toBeVisible();
});

test("empty and missing plans say what to do; Approve is disabled with the reason", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, { goal: "Nothing yet", steps: [] }));
  await expect(page.getByText("This plan has no steps yet.")).toBeVisible();
  await expect(page.getByRole("button", { name: /Approve and run/ })).toBeDisabled();
  await expect(page.getByTestId("validation-banner")).toContainText("Approve is disabled: the plan has no steps");

  await page.goto("/plans/plan-00000000");
  await expect(page.getByRole("alert").filter({ hasText: "There is no plan" })).toContainText(
    "There is no plan plan-00000000.",
  );
  await expect(page.getByRole("link", { name: "list of plans" })).toBeVisible();
});

test("the plan page has no serious or critical accessibility violations", async ({ page, request }) => {
  const view = new PlanViewPage(page);
  await view.open(await createPlanViaApi(request, plan));
  await view.edit("step_2");
  await page.getByRole("button", { name: "History" }).click();
  await expect(page.locator("tr[data-version]")).toHaveCount(1);
  expect(await axeViolations(page, { seriousOnly: true })).toEqual([]);

  await page.getByRole("button", { name: "Graph" }).click();
  await expect(page.locator("[data-graph-step]")).toHaveCount(4);
  expect(await axeViolations(page, { seriousOnly: true })).toEqual([]);
});
