import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, test } from "@playwright/test";
import { RunViewPage } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";
import { AuditLogPage } from "./pages/workspace-audit-pages";

/**
 * Two people, each with their own credential, complete a gate that the workspace's approver
 * policy says needs two approvals: the first approval leaves the step waiting ("1 of 2
 * approvals"), a second person signed in with their own token in another browser releases it,
 * and the audit names both and the policy. The policy is set on a workspace of this test's own,
 * so the shared server's other runs keep the default.
 */
test("a second person, signed in with their own token, completes a two-approval gate", async ({
  page,
  browser,
  request,
}) => {
  const tag = Date.now().toString(36);
  const directory = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-e2e-policy-"));
  const workspace = await trpc<{ id: string }>(request, "workspaces.register", { path: directory });
  await trpc(request, "people.setApproverPolicy", {
    workspaceId: workspace.id,
    policy: { approvals: { low: 1, medium: 1, high: 2 }, authorMayApprove: true },
  });

  // The admin adds a person on the People page; the token is shown once.
  const second = `ben-${tag}`;
  await page.goto("/people");
  // A person types once the page shows who is there already.
  await expect(page.getByRole("table", { name: "People and agents" })).toBeVisible();
  const add = page.getByRole("form", { name: "Add a person or agent" });
  await add.getByLabel("Name").fill(second);
  await add.getByLabel("Role").selectOption("approver");
  await add.getByRole("button", { name: "Add and make a token" }).click();
  const token = (await page.getByTestId("new-token").textContent())!.trim();
  expect(token).toMatch(/^swp_/);
  await expect(page.getByRole("row", { name: second }).getByLabel(`Role of ${second}`)).toHaveValue("approver");

  const plan = await trpc<{ id: string; version: number }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal: `Clean ${tag}`,
      steps: [
        { id: "step_1", description: "Clean the build", tool: "shell", args: { command: `rm -rf build-${tag}` } },
      ],
    }),
    workspaceId: workspace.id,
  });
  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", { planId: plan.id, version: plan.version });

  // The first approval (the access token's holder, "user") is recorded; the step keeps waiting.
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.decide("step_1", true);
  await expect(run.pendingItem("step_1").getByTestId("approval-tally")).toContainText(
    "1 of 2 approvals — waiting for another approver",
  );
  await expect(run.pendingItem("step_1").getByTestId("approval-tally")).toContainText("approved by user");
  await run.expectStepStatus("step_1", "awaiting_approval");

  // The second person signs in with their own token in a browser of their own.
  const other = await browser.newContext({ storageState: { cookies: [], origins: [] } });
  try {
    const theirs = await other.newPage();
    await theirs.goto(`/sign-in?token=${encodeURIComponent(token)}`);
    await theirs.getByRole("button", { name: `Sign in as ${second}` }).click();
    await expect(theirs.getByTestId("signed-in-as")).toHaveText(`${second} · approver`);
    const theirRun = new RunViewPage(theirs);
    await theirRun.open(runId);
    await expect(theirRun.pendingItem("step_1").getByTestId("approval-tally")).toContainText("1 of 2 approvals");
    await theirRun.decide("step_1", true);
    await theirRun.expectRunStatus("completed");
  } finally {
    await other.close();
  }

  await page.goto(`/audit?run=${runId}`);
  const audit = new AuditLogPage(page);
  await expect(audit.entry("step.approved")).toHaveCount(2);
  await expect(audit.entry("step.approved").nth(0)).toContainText(second);
  await expect(audit.entry("step.approved").nth(0)).toContainText("policy: 2 approvals for high risk");
  await expect(audit.entry("step.approved").nth(0)).toContainText(`approvals: user, ${second}`);
  await expect(audit.entry("step.approved").nth(1)).toContainText("user");
});
