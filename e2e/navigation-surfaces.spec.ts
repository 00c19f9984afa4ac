import { expect, test } from "@playwright/test";
import { startScriptedLlm, type ScriptedLlm } from "../tests/scripted-llm";
import { query, trpc } from "./pages/trpc-api";
import { E2E_LLM_PORT } from "./e2e-env";

/**
 * The surfaces a newcomer meets first: one "New" entry that says which way to start a plan, a plan
 * that has run leading with its latest run, and audit rows of planning sessions that read as words
 * and link to the session.
 */
const tag = Date.now().toString(36);

let llm: ScriptedLlm;
test.beforeAll(async () => {
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
});
test.afterAll(async () => {
  await llm?.close();
});

test("the navigation has one New entry that explains the ways to start a plan", async ({ page }) => {
  await page.goto("/");
  const nav = page.getByRole("banner").getByRole("navigation");
  await expect(nav.getByRole("link", { name: "New task" })).toHaveCount(0);
  await expect(nav.getByRole("link", { name: "New plan" })).toHaveCount(0);
  await nav.getByRole("link", { name: "New", exact: true }).click();

  await expect(page).toHaveURL(/\/new$/);
  await expect(page.getByRole("heading", { level: 1, name: "Start a new plan" })).toBeVisible();
  const ways = page.getByRole("list", { name: "Ways to start a plan" }).getByRole("listitem");
  await expect(ways).toHaveCount(3);
  await expect(ways.nth(0)).toContainText("The planner looks at the workspace");
  await expect(ways.nth(1)).toContainText("Paste a plan as JSON");

  await page.getByRole("link", { name: "Describe the goal" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "New task" })).toBeVisible();
  await page.goBack();
  await page.getByRole("link", { name: "Paste or import steps" }).click();
  await expect(page.getByRole("heading", { level: 1, name: "New plan" })).toBeVisible();
});

test("a plan that has run leads with its latest run", async ({ page, request }) => {
  const plan = await trpc<{ id: string }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal: `Ran once ${tag}`,
      steps: [{ id: "step_1", description: "Say it", tool: "echo", args: { value: 1 } }],
    }),
  });
  await page.goto(`/plans/${plan.id}`);
  await expect(page.getByRole("heading", { level: 1, name: `Ran once ${tag}` })).toBeVisible();
  await expect(page.getByTestId("latest-run")).toHaveCount(0);
  await expect(page.locator("#plan-validation")).toHaveText("This plan is valid and can be approved.");

  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", { planId: plan.id, version: 1 });
  await expect
    .poll(async () => (await query<{ status: string }>(request, "runs.get", { runId })).status)
    .toBe("completed");

  await page.reload();
  const latest = page.getByTestId("latest-run");
  await expect(latest).toContainText("Latest run: v1");
  await expect(latest).toContainText("completed");
  await expect(latest.getByRole("link", { name: "Open the run" })).toHaveAttribute("href", `/runs/${runId}`);
  // It comes first: before the plan's heading and its Approve button.
  const order = await page
    .locator(".plan-page")
    .evaluate((section) => [...section.children].map((child) => child.getAttribute("data-testid") ?? child.tagName));
  expect(order[0]).toBe("latest-run");
  await expect(page.locator("#plan-validation")).toHaveText(
    "This plan is valid. Approving it again starts another run.",
  );
});

test("a planning answer in the audit log reads as words and links to its session", async ({ page, request }) => {
  llm.reset();
  llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Which changelog?" } }] }, { status: 500 });
  const goal = `Tidy the changelog ${tag}`;
  const { sessionId } = await trpc<{ sessionId: string }>(request, "planner.start", { goal, mode: "deep" });
  let questionId: string | undefined;
  await expect
    .poll(async () => {
      const session = await query<{ questions: { id: string; answer: string | null }[] }>(request, "planner.session", {
        sessionId,
      });
      questionId = session.questions.find((question) => question.answer === null)?.id;
      return questionId;
    })
    .toBeTruthy();
  await trpc(request, "planner.answer", { sessionId, questionId, answer: "The root one" });

  await page.goto("/audit");
  const row = page.locator("tr[data-audit-action='planning.answered']").filter({ hasText: goal });
  await expect(row).toHaveCount(1);
  await expect(row).toContainText("answered the planner's question");
  await expect(row.getByRole("link", { name: goal })).toHaveAttribute("href", `/tasks/${sessionId}`);
});
