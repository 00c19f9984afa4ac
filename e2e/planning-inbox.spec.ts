import { expect, test, type APIRequestContext, type Page } from "@playwright/test";
import { goodPlan, goodStep } from "../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../tests/scripted-llm";
import { PlanningSessionPage } from "./pages/planner-pages";
import { PlanViewPage } from "./pages/plan-pages";
import { trpc, query } from "./pages/trpc-api";
import { E2E_LLM_PORT } from "./e2e-env";

/**
 * Seed 002 beyond one session: the Planning list, the Inbox with its count in the navigation,
 * Reject and Edit of a submitted plan, and archiving plans. The model is the scripted one.
 */

let llm: ScriptedLlm;
test.beforeAll(async () => {
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
});
test.afterAll(async () => {
  await llm?.close();
});
test.beforeEach(() => llm.reset());

/** A quick planning session whose plan passed the gates: a plan waiting for review. */
async function submittedSession(request: APIRequestContext, page: Page, goal: string) {
  llm.script({ json: goodPlan });
  const { sessionId } = await trpc<{ sessionId: string }>(request, "planner.start", { goal, mode: "quick" });
  await page.goto(`/tasks/${sessionId}`);
  const session = new PlanningSessionPage(page);
  await session.expectStatus("completed");
  await expect(page.getByTestId("session-state")).toHaveText("Submitted");
  return { sessionId, session };
}

const gatedPlan = (goal: string) => ({
  goal,
  steps: [
    { id: "step_1", description: "Say it after approval", tool: "echo", args: { value: 1 }, approvalRequired: true },
  ],
});

const inboxLink = (page: Page, count: number) =>
  page.getByRole("banner").getByRole("link", { name: `Inbox (${count})`, exact: true });

test("the planning list shows a deep-mode session waiting for an answer, and filters by state", async ({
  page,
  request,
}) => {
  llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Which README, the root one?" } }] });
  const { sessionId } = await trpc<{ sessionId: string }>(request, "planner.start", {
    goal: "Summarise the README for the list",
    mode: "deep",
  });
  await page.goto("/planning");
  await expect(page.getByRole("heading", { name: "Planning" })).toBeVisible();
  const row = page.locator(`tr[data-session-id="${sessionId}"]`);
  await expect(row).toHaveAttribute("data-state", "waiting");
  await expect(row).toContainText("Question for you");
  await expect(row).toContainText("your answer: “Which README, the root one?”");
  await expect(row.getByRole("link", { name: "Summarise the README for the list" })).toHaveAttribute(
    "href",
    `/tasks/${sessionId}`,
  );

  const filters = page.getByRole("group", { name: "Filter by state" });
  await filters.getByRole("button", { name: /^Approved/ }).click();
  await expect(row).toHaveCount(0);
  await filters.getByRole("button", { name: /^Question for you/ }).click();
  await expect(row).toBeVisible();
  await expect(page.locator("tr[data-state]:not([data-state='waiting'])")).toHaveCount(0);
  // "Waiting for you" is everything whose next move is the person's, questions and reviews alike.
  await filters.getByRole("button", { name: /^Waiting for you/ }).click();
  await expect(row).toBeVisible();
  await expect(page.locator("tr[data-waits-on]:not([data-waits-on='you'])")).toHaveCount(0);

  await trpc(request, "planner.cancel", { sessionId });
  await filters.getByRole("button", { name: /^Cancelled/ }).click();
  await expect(row).toHaveAttribute("data-state", "cancelled");
});

test("the inbox gathers a planning question, a gated step and a submitted plan; the nav count goes down as each is handled", async ({
  page,
  request,
}) => {
  const before = (await query<{ count: number }>(request, "inbox.list")).count;

  // Scripted replies are consumed in order: the plan to review first.
  const { sessionId: reviewSession } = await submittedSession(request, page, "Inbox plan to review");
  // A deep session asks; after the answer the model fails, so no new item follows the question.
  llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Staging or production?" } }] }, { status: 500 });
  const asking = await trpc<{ sessionId: string }>(request, "planner.start", {
    goal: "Deploy the docs",
    mode: "deep",
  });
  await expect
    .poll(
      async () => (await query<{ status: string }>(request, "planner.session", { sessionId: asking.sessionId })).status,
    )
    .toBe("awaiting_answer");

  const gated = await trpc<{ id: string }>(request, "plans.createFromJson", {
    planJson: JSON.stringify(gatedPlan("Inbox gated step")),
  });
  await trpc(request, "plans.approve", { planId: gated.id, version: 1 });

  // The Planning list's "Waiting for you" counts the plan to review and the question, as the inbox does.
  await page.goto("/planning");
  const reviewRow = page.locator(`tr[data-session-id="${reviewSession}"]`);
  await expect(reviewRow).toHaveAttribute("data-state", "submitted");
  await expect(reviewRow).toHaveAttribute("data-waits-on", "you");
  const planningForYou = async () => {
    const list = await query<{ waitingForYou: number; sessions: { id: string }[] }>(request, "planning.list", {
      waitsOn: "you",
    });
    return { count: list.waitingForYou, ids: list.sessions.map((session) => session.id) };
  };
  const forYou = await planningForYou();
  expect(forYou.ids).toEqual(expect.arrayContaining([reviewSession, asking.sessionId]));
  await expect(
    page
      .getByRole("group", { name: "Filter by state" })
      .getByRole("button", { name: `Waiting for you (${forYou.count})` }),
  ).toBeVisible();

  await page.goto("/inbox");
  await expect(inboxLink(page, before + 3)).toBeVisible();
  const items = page.getByRole("list", { name: "Waiting for you" });
  // Other specs share this server and may leave their own items waiting: look only at ours.
  const ourQuestion = items.locator("[data-kind='planning_question']").filter({ hasText: "Staging or production?" });
  await expect(ourQuestion).toHaveCount(1);
  await expect(items.locator("[data-kind='step_approval']").filter({ hasText: "Inbox gated step" })).toHaveCount(1);
  await expect(items.locator("[data-kind='plan_review']").filter({ hasText: "Inbox plan to review" })).toHaveCount(1);

  const question = page.getByRole("form", { name: "Answer: Staging or production?" });
  await question.getByLabel("Your answer").fill("Staging");
  await question.getByRole("button", { name: "Send answer" }).click();
  await expect(inboxLink(page, before + 2)).toBeVisible();
  await expect(ourQuestion).toHaveCount(0);

  await page.getByRole("button", { name: "Approve step_1 of Inbox gated step" }).click();
  await expect(inboxLink(page, before + 1)).toBeVisible();

  const review = items.locator("[data-kind='plan_review']").filter({ hasText: "Inbox plan to review" });
  await expect(review.getByRole("link", { name: "The planning session" })).toHaveAttribute(
    "href",
    `/tasks/${reviewSession}`,
  );
  await review.getByRole("link", { name: "Review plan v1" }).click();
  await page.getByRole("button", { name: "Approve and run v1" }).click();
  await expect(page).toHaveURL(/\/runs\//);
  // The count in the navigation catches up without a reload.
  await expect(inboxLink(page, before)).toBeVisible();
});

test("reject from the planning session page: the session says rejected and Approve is no longer offered", async ({
  page,
  request,
}) => {
  const { sessionId } = await submittedSession(request, page, "A plan to reject");
  const decision = page.getByRole("group", { name: "Decide on the plan" });
  await decision.getByLabel("Instructions to revise by, or why you reject it").fill("Reading is not enough");
  await decision.getByRole("button", { name: "Reject the plan" }).click();
  await expect(page.getByTestId("session-state")).toHaveText("Rejected");
  await expect(page.getByText("This plan was rejected; it will not run.")).toBeVisible();
  await expect(page.getByRole("link", { name: "Review the plan" })).toHaveCount(0);

  const session = await query<{ planId: string }>(request, "planner.session", { sessionId });
  await new PlanViewPage(page).open(session.planId);
  await expect(page.getByTestId("plan-set-aside")).toContainText("This plan was rejected (version 1)");
  await expect(page.getByRole("button", { name: "Approve and run v1" })).toBeDisabled();

  await page.goto("/planning");
  await expect(page.locator(`tr[data-session-id="${sessionId}"]`)).toHaveAttribute("data-state", "rejected");
  // In the plans list a rejected plan is set aside like an archived one, with its state.
  await page.goto("/");
  await expect(page.getByRole("link", { name: "A plan to reject" })).toHaveCount(0);
  await page.getByRole("group", { name: "Show plans" }).getByRole("button", { name: "Archived" }).click();
  const listed = page.getByRole("row").filter({ has: page.getByRole("link", { name: "A plan to reject" }) });
  await expect(listed).toContainText("rejected");
});

test("edit sends instructions back to the planner, which re-submits version 2 with its diff", async ({
  page,
  request,
}) => {
  await submittedSession(request, page, "A plan to revise");
  llm.script((chat) =>
    JSON.stringify(chat.messages).includes("Read it twice to be sure")
      ? { json: { ...goodPlan, steps: [goodPlan.steps[0], { ...goodStep("verify"), title: "Read it again" }] } }
      : { status: 400 },
  );
  const before = page.url();
  const decision = page.getByRole("group", { name: "Decide on the plan" });
  await decision.getByLabel("Instructions to revise by, or why you reject it").fill("Read it twice to be sure");
  await decision.getByRole("button", { name: "Edit: revise with these instructions" }).click();
  await expect(page).not.toHaveURL(before);
  const revision = new PlanningSessionPage(page);
  await revision.expectStatus("completed");
  await expect(page.getByText("Version 2 is ready for review.")).toBeVisible();
  await expect(page.getByTestId("session-state")).toHaveText("Submitted");

  await page.getByRole("link", { name: "See what changed in v2 (the diff)" }).click();
  await expect(page.getByTestId("plan-version")).toHaveText("version 2");
  const diff = page.getByRole("region", { name: "Changes from v1 to v2" });
  await expect(diff.getByTestId("diff-added")).toContainText("step_3");
  await expect(diff.getByTestId("diff-removed")).toContainText("step_2");
});

test("archive is refused while a run is active; archived plans hide behind a filter and can be restored", async ({
  page,
  request,
}) => {
  const goal = "A plan to archive";
  const plan = await trpc<{ id: string }>(request, "plans.createFromJson", {
    planJson: JSON.stringify(gatedPlan(goal)),
  });
  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", { planId: plan.id, version: 1 });
  const view = new PlanViewPage(page);
  await view.open(plan.id);
  await page.getByRole("button", { name: "Archive" }).click();
  await expect(page.getByRole("alert").filter({ hasText: "still running" })).toBeVisible();
  await expect(page.getByTestId("plan-set-aside")).toHaveCount(0);

  await trpc(request, "runs.cancel", { runId });
  await expect
    .poll(async () => (await query<{ status: string }>(request, "runs.get", { runId })).status)
    .toBe("cancelled");
  await page.getByRole("button", { name: "Archive" }).click();
  await expect(page.getByTestId("plan-set-aside")).toContainText("This plan is archived");
  await expect(page.getByRole("button", { name: "Approve and run v1" })).toBeDisabled();

  await page.goto("/");
  await expect(page.getByRole("heading", { name: "Plans" })).toBeVisible();
  await expect(page.getByRole("link", { name: goal })).toHaveCount(0);
  await page.getByRole("group", { name: "Show plans" }).getByRole("button", { name: "Archived" }).click();
  await page.getByRole("link", { name: goal }).click();

  await page.getByTestId("plan-set-aside").getByRole("button", { name: "Restore" }).click();
  await expect(page.getByTestId("plan-set-aside")).toHaveCount(0);
  await expect(page.getByRole("button", { name: "Approve and run v1" })).toBeEnabled();
  await page.goto("/");
  await expect(page.getByRole("link", { name: goal })).toBeVisible();
});
