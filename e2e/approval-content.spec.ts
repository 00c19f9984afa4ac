import { expect, test } from "@playwright/test";
import { trpc } from "./pages/trpc-api";

/**
 * What the approver sees is computed, not claimed: the inbox shows the exact arguments a gated
 * step will run with (`$step` references resolved) and the risk judged from the command itself,
 * whatever the plan's author wrote in `risk` and `capabilityLabel`.
 */
test("the inbox shows a gated `rm -rf build` step's arguments and its computed risk, not the author's claim", async ({
  page,
  request,
}) => {
  const goal = `Clean the build ${Date.now()}`;
  const claims = { risk: "low", capabilityLabel: "Read files" };
  const plan = await trpc<{ id: string }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal,
      steps: [
        { id: "step_1", description: "Delete the build", tool: "shell", args: { command: "rm -rf build" }, ...claims },
        { id: "step_2", description: "Name the command", tool: "echo", args: { value: "rm -rf build" } },
        {
          id: "step_3",
          description: "Run the named command",
          tool: "shell",
          args: { command: "$step_2" },
          dependsOn: ["step_2"],
          ...claims,
        },
      ],
    }),
  });
  // The review page judges the same way, on each card, before anyone approves.
  await page.goto(`/plans/${plan.id}`);
  const card = page.locator("[data-step-id='step_1']");
  await expect(card.getByTestId("computed-risk")).toHaveText("high risk");
  await expect(card.getByTestId("author-says")).toHaveText("· the plan’s author says: Read files, low risk");
  await expect(page.locator("[data-step-id='step_2']").getByTestId("author-says")).toHaveCount(0);

  await trpc(request, "plans.approve", { planId: plan.id, version: 1 });

  await page.goto("/inbox");
  const items = page.getByRole("list", { name: "Waiting for you" });
  const ours = items.locator("[data-kind='step_approval']").filter({ hasText: goal });
  await expect(ours).toHaveCount(2);

  const direct = ours.filter({ hasText: "Delete the build" });
  const details = direct.getByTestId("approval-details");
  await expect(details.getByTestId("approval-args")).toContainText('"command": "rm -rf build"');
  await expect(details.getByTestId("computed-risk")).toHaveText("high risk");
  await expect(details.getByTestId("computed-capability")).toHaveText("Run shell commands");
  await expect(details.getByTestId("author-says")).toHaveText("The plan’s author says: Read files, low risk.");
  await expect(direct.getByText("low risk", { exact: true })).toHaveCount(0);

  // A `$step` reference is shown as the value it will be replaced by, and judged on that value.
  const referenced = ours.filter({ hasText: "Run the named command" });
  await expect(referenced.getByTestId("approval-args")).toContainText('"command": "rm -rf build"');
  await expect(referenced.getByTestId("approval-args")).not.toContainText("$step_2");
  await expect(referenced.getByTestId("computed-risk")).toHaveText("high risk");

  // Approve sends the hash of what was shown; the engine accepts it for this very definition.
  await page.getByRole("button", { name: `Deny step_3 of ${goal}` }).click();
  await page.getByRole("button", { name: `Approve step_1 of ${goal}` }).click();
  await expect(ours).toHaveCount(0);
});
