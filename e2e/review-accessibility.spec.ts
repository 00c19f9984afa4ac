import { axeViolations } from "./pages/accessibility";
import { expect, test } from "@playwright/test";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";
import { trpc } from "./pages/trpc-api";

/**
 * Review at scale, without a mouse: on a plan with open comment threads, axe finds nothing on the
 * page — threads expanded, the approval note and run options filled in — and a person comments,
 * replies and approves with the keyboard alone.
 */
const tag = Date.now().toString(36);

test("the review page with comments and the approval controls is clean under axe, and works by keyboard", async ({
  page,
  request,
}) => {
  const steps = Array.from({ length: 12 }, (_, i) => ({
    id: `step_${i + 1}`,
    description: `Say ${i + 1}`,
    tool: "echo",
    args: { value: i + 1 },
    ...(i > 0 && { dependsOn: [`step_${i}`] }),
  }));
  const planId = await createPlanViaApi(request, { goal: `Review by keyboard ${tag}`, steps });
  for (const [stepId, body] of [
    ["step_2", "Is two the right number?"],
    ["step_2", "Please double-check the value"],
    ["step_5", "Say five louder"],
  ] as const) {
    await trpc(request, "plans.comment", { planId, version: 1, stepId, intent: "change", body });
  }
  await trpc(request, "plans.comment", { planId, version: 1, body: "The whole plan reads well" });

  const view = new PlanViewPage(page);
  await view.open(planId);
  await expect(page.getByTestId("comments-waiting")).toContainText("comments waiting for an answer");

  // Open a thread and reply to it with the keyboard alone.
  const card = view.step("step_2");
  await card.getByRole("button", { name: /Comments \(2 open\) on step_2/ }).focus();
  await page.keyboard.press("Enter");
  const thread = card.locator("[data-comment-id]");
  await expect(thread).toHaveCount(2);
  // Reply to the first thread: type into its own field, Enter sends.
  await card.getByRole("textbox", { name: "Reply to comment 1 on step_2" }).focus();
  await page.keyboard.type("Two is right; it feeds step three");
  await page.keyboard.press("Enter");
  await expect(thread.first().getByRole("list", { name: "Replies" })).toContainText("Two is right");
  await view
    .step("step_5")
    .getByRole("button", { name: /Comments \(1 open\) on step_5/ })
    .focus();
  await page.keyboard.press("Enter");
  await expect(view.step("step_5").locator("[data-comment-id]")).toHaveCount(1);

  // A new comment on another step, by keyboard.
  const third = view.step("step_3");
  await third.getByRole("button", { name: "Comment on step_3" }).focus();
  await page.keyboard.press("Enter");
  const form = third.getByRole("form", { name: "New comment on step_3" });
  await form.getByRole("textbox", { name: "Comment on step_3" }).focus();
  await page.keyboard.type("Step three is fine as it is");
  await page.keyboard.press("Tab");
  await page.keyboard.press("Enter");
  await expect(third.locator("[data-comment-id]")).toHaveCount(1);

  // The approval controls, filled in.
  const note = page.getByLabel("Note with the approval (optional)");
  await note.focus();
  await page.keyboard.type("Go ahead; mind the comments on step 2");

  expect(await axeViolations(page)).toEqual([]);

  // Approve: back from the note to the button, and Enter.
  await page.keyboard.press("Shift+Tab");
  await expect(page.getByRole("button", { name: "Approve and run v1" })).toBeFocused();
  await page.keyboard.press("Enter");
  await page.waitForURL(/\/runs\//);
  await expect(page.getByText("Go ahead; mind the comments on step 2")).toBeVisible();
});
