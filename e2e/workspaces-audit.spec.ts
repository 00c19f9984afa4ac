import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, test } from "@playwright/test";
import { E2E_DATA_DIR } from "./e2e-env";
import { NewPlanPage } from "./pages/plan-pages";
import { RunViewPage } from "./pages/run-pages";
import { AuditLogPage, WorkspacesPage } from "./pages/workspace-audit-pages";

/**
 * A person registers a directory as a workspace, names it, makes a plan in it and approves it: the
 * run acts there and says so. While the run is unfinished the workspace cannot be removed. The
 * audit log of the run shows the approval and the gate decision by the signed-in person
 * (`user`), an agent's cancellation by the agent, and filters by person.
 */
const tag = Date.now().toString(36);
let directory: string;

test.beforeAll(async () => {
  directory = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-e2e-ws-")));
});
test.afterAll(async () => {
  await fs.rm(directory, { recursive: true, force: true });
});

test("a plan runs in the workspace chosen for it, and the audit log shows who decided", async ({ page, request }) => {
  const workspaces = new WorkspacesPage(page);
  const name = `Site ${tag}`;
  await workspaces.open();
  await workspaces.register(directory);
  await expect(workspaces.row(path.basename(directory))).toContainText(directory);
  await workspaces.rename(path.basename(directory), name);
  await expect(workspaces.row(name)).toContainText(directory);
  await expect(workspaces.row(name).getByText("idle")).toBeVisible();

  // A manual plan in that workspace: a gated write, then a second gated write that keeps the run open.
  const newPlan = new NewPlanPage(page);
  await newPlan.open();
  await page.getByLabel("Workspace").selectOption({ label: `${name} — ${directory}` });
  await newPlan.create(`Write notes ${tag}`, {
    steps: [
      { id: "step_1", description: "Write notes", tool: "write_file", args: { path: "notes.txt", content: "hi\n" } },
      {
        id: "step_2",
        description: "Write more",
        tool: "write_file",
        args: { path: "more.txt", content: "more\n" },
        dependsOn: ["step_1"],
      },
    ],
  });
  await expect(page.getByTestId("plan-workspace")).toContainText(name);
  await expect(page.getByTestId("plan-workspace")).toContainText(directory);
  await page.getByRole("button", { name: /Approve and run v1/ }).click();

  const run = new RunViewPage(page);
  await expect(run.run()).toBeVisible();
  await expect(page.getByTestId("run-workspace")).toContainText(name);
  await expect(page.getByTestId("run-workspace")).toContainText(directory);
  const runId = page.url().split("/runs/")[1]!;
  await run.expectStepStatus("step_1", "awaiting_approval");
  await run.decide("step_1", true, `Fine by me ${tag}`);
  await run.expectStepStatus("step_2", "awaiting_approval");
  expect(await fs.readFile(path.join(directory, "notes.txt"), "utf8")).toBe("hi\n");

  // Removal is refused while the run is unfinished.
  await workspaces.open();
  await workspaces.remove(name);
  await expect(workspaces.row(name).getByRole("alert")).toContainText("in use by 1 unfinished run");
  await expect(workspaces.row(name)).toContainText("1 unfinished run");

  // An agent cancels the run: the log names the agent for that, and the person for the rest.
  const { token } = JSON.parse(await fs.readFile(path.join(E2E_DATA_DIR, "server.json"), "utf8"));
  const cancelled = await request.post("/api/ops/run.cancel", {
    data: { runId },
    headers: { authorization: `Bearer ${token}`, "x-stepwise-agent": `audit-bot-${tag}` },
  });
  expect(cancelled.ok()).toBe(true);

  await run.open(runId);
  await run.expectRunStatus("cancelled");
  await page.getByRole("link", { name: "Audit log for this run" }).click();
  await expect(page).toHaveURL(new RegExp(`/audit\\?run=${runId}$`));
  const audit = new AuditLogPage(page);
  await expect(audit.entry("plan.approved")).toContainText("user");
  await expect(audit.entry("step.approved")).toContainText("user");
  await expect(audit.entry("step.approved")).toContainText(`Fine by me ${tag}`);
  await expect(audit.entry("step.approved")).toContainText("step_1");
  await expect(audit.entry("run.cancelled")).toContainText(`audit-bot-${tag}`);
  await expect(audit.entries()).toHaveCount(3);

  // Choosing a person's name keeps the run filter and shows only their decisions.
  await audit
    .entry("run.cancelled")
    .getByRole("link", { name: `audit-bot-${tag}` })
    .click();
  await expect(page).toHaveURL(/person=audit-bot-/);
  await expect(audit.entries()).toHaveCount(1);
  await expect(audit.entry("run.cancelled")).toBeVisible();
  await audit.filterByPerson("user");
  await expect(page).toHaveURL(/person=user/);
  await expect(audit.entries()).toHaveCount(2);
  await expect(audit.entry("run.cancelled")).toHaveCount(0);

  // The run is over: now the workspace can go, and the run keeps saying where it ran.
  await workspaces.open();
  await workspaces.remove(name);
  await expect(workspaces.row(name)).toHaveCount(0);
  await run.open(runId);
  await expect(page.getByTestId("run-workspace")).toContainText(directory);
});

test("a directory registered while the list is still loading appears in the list", async ({ page }) => {
  const late = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-e2e-late-")));
  try {
    // The page's first list answer is held back until the registration has been answered and
    // acted on: it tells of the list before the new directory, and must not be the last word.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let first = true;
    await page.route(/\/api\/trpc\/[^?]*workspaces\.list/, async (route) => {
      if (!first) return route.continue();
      first = false;
      const response = await route.fetch();
      await released;
      // The page may have given up on this request by then (that is the fix): nothing to answer.
      await route.fulfill({ response }).catch(() => undefined);
    });
    const workspaces = new WorkspacesPage(page);
    await workspaces.open();
    await workspaces.register(late);
    // The form empties itself when the registration succeeded, just before it refreshes the list.
    await expect(page.getByRole("form", { name: "Register a workspace" }).getByLabel("Absolute path")).toHaveValue("");
    release();
    await expect(workspaces.row(path.basename(late))).toContainText(late);
  } finally {
    await fs.rm(late, { recursive: true, force: true });
  }
});
