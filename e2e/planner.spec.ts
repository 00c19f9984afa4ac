import { spawn, type ChildProcess } from "node:child_process";
import { axeViolations } from "./pages/accessibility";
import { expect, test } from "@playwright/test";
import { cyclicPlanWithUnknownTool, goodPlan, goodStep } from "../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../tests/scripted-llm";
import { NewTaskPage, PlanCommandBox, PlanningSessionPage, PlanPlannerTools } from "./pages/planner-pages";
import { RunViewPage } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";
import { E2E_LLM_PORT, extraAppPort } from "./e2e-env";

/** Same port as playwright.config.ts gives the app under test as its OpenAI-compatible provider. */

let llm: ScriptedLlm;
test.beforeAll(async () => {
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
});
test.afterAll(async () => {
  await llm?.close();
});
test.beforeEach(() => llm.reset());

test("quick mode: a first draft with a cycle and an unknown tool is fixed by the refine loop before anyone sees it", async ({
  page,
}) => {
  llm.script({ json: cyclicPlanWithUnknownTool }, { json: goodPlan });
  const newTask = new NewTaskPage(page);
  await newTask.open();
  await expect(page.getByLabel("Model")).toHaveValue("compatible:scripted-planner");
  const session = await newTask.plan("Show what the README says");
  await session.expectStatus("completed");
  const progress = session.progress();
  await expect(progress).toContainText("Gathering context: Workspace snapshot");
  await expect(progress).toContainText("Quality gates failed");
  await expect(progress).toContainText("Circular dependency");
  await expect(progress).toContainText("Unknown tool: teleport_file");
  await expect(progress).toContainText("Refining the plan (refinement 1)");
  await expect(progress).toContainText("The draft passed every quality gate");
  await expect(progress).toContainText(/Model call \(draft\): [\d,]+ in \/ [\d,]+ out tokens/);
  await expect(page.getByTestId("planning-session")).toContainText(/trace [0-9a-f-]{36}/);
  await session.reviewPlan();
  await expect(page.locator('li[data-step-id="step_2"]')).toContainText("Echo the README");
  await expect(page.getByTestId("plan-version")).toHaveText("version 1");
  await expect(new PlanPlannerTools(page).usage()).toContainText("2 model calls");
});

test("deep mode: a read-only tool call, a question answered in the browser, then submit_plan", async ({ page }) => {
  llm.script(
    { toolCalls: [{ name: "list_dir", arguments: { path: "." } }] },
    { toolCalls: [{ name: "ask_user", arguments: { question: "Should the plan also echo the README?" } }] },
    (request) => ({
      toolCalls: [
        {
          name: "submit_plan",
          // The answer given in the browser reached the model.
          arguments: JSON.stringify(request.messages).includes("Yes, echo it")
            ? goodPlan
            : { ...goodPlan, summary: "answer missing" },
        },
      ],
    }),
  );
  const newTask = new NewTaskPage(page);
  await newTask.open();
  const session = await newTask.plan("Show the README", { mode: "deep" });
  await session.expectStatus("awaiting_answer");
  await expect(session.progress()).toContainText('Looked at the workspace: list_dir {"path":"."}');
  await session.answer("Should the plan also echo the README?", "Yes, echo it");
  await session.expectStatus("completed");
  await expect(session.progress()).toContainText("Answered: Yes, echo it");
  await session.reviewPlan();
  await expect(page.getByText(goodPlan.summary)).toBeVisible();
});

test("the judge's rejection goes back to the model; the approved plan is shown", async ({ page }) => {
  llm.script(
    { json: goodPlan },
    { json: { is_approved: false, feedback: "Verify the output at the end." } },
    { json: goodPlan },
    { json: { is_approved: true, feedback: "Good." } },
  );
  const newTask = new NewTaskPage(page);
  await newTask.open();
  const session = await newTask.plan("Show the README", { judge: true });
  await session.expectStatus("completed");
  await expect(session.progress()).toContainText("Judge rejected: Verify the output at the end.");
  await expect(session.progress()).toContainText("Judge approved: Good.");
});

test("a provider 500 and a timeout become clear messages with a retry", async ({ page }) => {
  llm.script({ status: 500, body: '{"error":{"message":"upstream exploded"}}' });
  const newTask = new NewTaskPage(page);
  await newTask.open();
  let session = await newTask.plan("Show the README");
  await session.expectStatus("failed");
  await expect(session.failure()).toContainText("failed with HTTP 500");
  await expect(session.failure()).not.toContainText(/\bat .+:\d+:\d+/);

  llm.script({ hang: true });
  session = await session.retry();
  await session.expectStatus("failed");
  await expect(session.failure()).toContainText("did not answer within 4 s");

  llm.script({ json: goodPlan });
  session = await session.retry();
  await session.expectStatus("completed");
});

test("planning can be cancelled while the model is working", async ({ page }) => {
  llm.script({ hang: true });
  const newTask = new NewTaskPage(page);
  await newTask.open();
  const session = await newTask.plan("Show the README");
  await session.expectStatus("running");
  await expect.poll(() => llm.requests.length).toBe(1);
  await session.cancel();
  await session.expectStatus("cancelled");
  await expect(page.getByText("Planning was cancelled. Nothing was saved.")).toBeVisible();
});

test("an empty or oversized goal cannot be submitted", async ({ page }) => {
  const newTask = new NewTaskPage(page);
  await newTask.open();
  const submit = page.getByRole("button", { name: "Plan it" });
  await expect(submit).toBeDisabled();
  await newTask.goal().fill("x".repeat(4_001));
  await expect(page.getByText("4001 / 4000 characters: too long, shorten the goal")).toBeVisible();
  await expect(submit).toBeDisabled();
  expect(llm.requests).toHaveLength(0);
});

test("regenerate with feedback makes a new version that is reviewed again", async ({ page, request }) => {
  llm.script({ json: goodPlan });
  const { sessionId } = await trpc<{ sessionId: string }>(request, "planner.start", {
    goal: "Show the README",
    mode: "quick",
  });
  await page.goto(`/tasks/${sessionId}`);
  await page.getByRole("link", { name: "Review the plan" }).click();
  await expect(page.getByTestId("plan-version")).toHaveText("version 1");

  llm.script((chat) => {
    const prompt = JSON.stringify(chat.messages);
    return prompt.includes("Read it twice to be sure")
      ? { json: { ...goodPlan, steps: [goodPlan.steps[0], { ...goodStep("verify"), title: "Read it again" }] } }
      : { status: 400 };
  });
  const session = await new PlanPlannerTools(page).regenerate("Read it twice to be sure");
  await session.expectStatus("completed");
  await expect(page.getByText("Version 2 is ready for review.")).toBeVisible();
  await session.reviewPlan();
  await expect(page.getByTestId("plan-version")).toHaveText("version 2");
  await expect(page.locator('li[data-step-id="step_3"]')).toContainText("Read it again");
  await expect(page.locator('li[data-step-id="step_2"]')).toHaveCount(0);
  await expect(page.getByRole("button", { name: "Approve and run v2" })).toBeEnabled();
  // The regenerated version's diff against version 1 is in the plan's history.
  await page.getByRole("button", { name: "History" }).click();
  const diff = page.getByRole("region", { name: "Changes from v1 to v2" });
  await expect(diff.getByTestId("diff-added")).toContainText("step_3");
  await expect(diff.getByTestId("diff-removed")).toContainText("step_2");
});

test("a failed step gets a recovery proposal that, accepted in the live view, lets the run finish", async ({
  page,
  request,
}) => {
  const created = await trpc<{ id: string }>(request, "plans.createFromJson", {
    goal: "Read the config",
    planJson: JSON.stringify({
      steps: [{ id: "step_1", description: "Read the config", tool: "read_file", args: { path: "config.json" } }],
    }),
  });
  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", { planId: created.id, version: 1 });
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.expectStepStatus("step_1", "failed");

  llm.script({
    json: {
      reasoning: "config.json does not exist; README.md does.",
      action: { kind: "retry", args: { path: "README.md" } },
    },
  });
  const panel = run.step("step_1").getByTestId("recovery-panel");
  await panel.getByRole("button", { name: "Ask the planner" }).click();
  const proposal = panel.getByTestId("recovery-proposal");
  await expect(proposal).toContainText("retry with new arguments");
  await expect(proposal).toContainText("config.json does not exist; README.md does.");
  await expect(proposal).toContainText('"path": "README.md"');
  await proposal.getByRole("button", { name: "Accept proposal" }).click();
  await run.expectStepStatus("step_1", "completed");
  await run.expectRunStatus("completed");
});

/** Starts a second app with no LLM provider (the same build), for the "not configured" journey. */
async function startUnconfiguredApp(port: number): Promise<{ url: string; token: string; stop(): Promise<void> }> {
  const token = `unconfigured-${Date.now()}-token`;
  // Its own process group, stopped as a whole: stopping only a wrapper leaves the server running.
  const child: ChildProcess = spawn(process.execPath, ["--import", "tsx", "e2e/serve-for-tests.ts"], {
    env: {
      ...process.env,
      PORT: String(port),
      STEPWISE_ACCESS_TOKEN: token,
      STEPWISE_LLM_BASE_URL: "",
      OPENAI_API_KEY: "",
      ANTHROPIC_API_KEY: "",
    },
    stdio: "ignore",
    detached: true,
  });
  const url = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 90_000;
  for (;;) {
    try {
      const ready = await fetch(`${url}/api/trpc/plans.list`, { headers: { authorization: `Bearer ${token}` } });
      if (ready.ok) break;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error("the unconfigured app did not start");
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
  return {
    url,
    token,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once("exit", () => resolve());
        // serve-for-tests stops its server, removes its database and folders, then exits.
        child.kill("SIGTERM");
      }),
  };
}

test("with no provider configured, New task says exactly what to set and manual plans still work", async ({ page }) => {
  test.setTimeout(150_000);
  const app = await startUnconfiguredApp(await extraAppPort("E2E_UNCONFIGURED_APP_PORT"));
  try {
    await page.goto(`${app.url}/sign-in?token=${app.token}`);
    await page.getByRole("button", { name: "Sign in as user" }).click();
    await page.waitForURL(`${app.url}/`);
    await page.goto(`${app.url}/tasks/new`);
    const help = page.getByTestId("configure-help");
    await expect(help).toContainText("No LLM provider is configured");
    for (const variable of ["OPENAI_API_KEY", "ANTHROPIC_API_KEY", "STEPWISE_LLM_BASE_URL", "STEPWISE_LLM_MODELS"]) {
      await expect(help).toContainText(variable);
    }
    await expect(page.getByRole("button", { name: "Plan it" })).toBeDisabled();
    await page.goto(`${app.url}/settings`);
    await expect(page.getByTestId("configure-help")).toBeVisible();
    await page.goto(`${app.url}/tasks/new`);
    await help.getByRole("link", { name: "write or import a plan by hand" }).click();
    await expect(page).toHaveURL(/\/plans\/new$/);
    await page.getByLabel("Goal").fill("Hand-written");
    await page.getByLabel(/Plan as JSON/).fill(JSON.stringify({ steps: [goodStep("step_1")] }));
    await page.getByRole("button", { name: "Create plan" }).click();
    await expect(page).toHaveURL(/\/plans\/plan-[0-9a-f]{8}$/);
  } finally {
    await app.stop();
  }
});

test("the New task form, a planning session with a question, and settings have no accessibility violations", async ({
  page,
}) => {
  const newTask = new NewTaskPage(page);
  await newTask.open();
  expect(await axeViolations(page)).toEqual([]);
  // Keyboard only: the goal, then on to the submit button.
  await newTask.goal().focus();
  await page.keyboard.type("Show the README");
  await page.getByRole("radio", { name: /Deep/ }).focus();
  await page.keyboard.press("Space");
  llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Which README?" } }] }, { json: goodPlan });
  await page.getByRole("button", { name: "Plan it" }).focus();
  await page.keyboard.press("Enter");
  const session = new PlanningSessionPage(page);
  await session.expectStatus("awaiting_answer");
  expect(await axeViolations(page)).toEqual([]);
  await page.getByRole("button", { name: "Cancel planning" }).click();
  await session.expectStatus("cancelled");
  await page.goto("/settings");
  await expect(page.getByRole("table", { name: "Configured providers" })).toContainText("Scripted");
  await expect(page.getByRole("table", { name: "Configured providers" })).toContainText("scripted-planner");
  // The sandbox's self-test, as this server ran it (bubblewrap is installed where the tests run).
  const selfTest = page.getByRole("table", { name: "Sandbox self-test" });
  await expect(selfTest.locator('[data-check="capabilities"]')).toContainText("refused, as it must be");
  await expect(selfTest.locator('[data-check="remount"]')).toContainText("refused, as it must be");
  expect(await axeViolations(page)).toEqual([]);
});

test("the /plan command box starts deep planning, tells its status, refuses a second start, and cancels it", async ({
  page,
  request,
}) => {
  // Other specs may leave a session of the default workspace open; `/plan` would then only report it.
  const sessions = await (await request.get("/api/trpc/planner.sessions")).json();
  for (const open of (sessions.result.data.json as { id: string; status: string }[]).filter((session) =>
    ["running", "awaiting_answer"].includes(session.status),
  )) {
    await trpc(request, "planner.cancel", { sessionId: open.id });
  }
  llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Which README do you mean?" } }] });
  const newTask = new NewTaskPage(page);
  await newTask.open();
  const box = new PlanCommandBox(page);
  await box.run("/plan Show the README");
  await expect(box.result()).toContainText("Started deep planning. Planning “Show the README”");
  await box.result().getByRole("link", { name: "Open the planning session" }).click();
  const session = new PlanningSessionPage(page);
  await session.expectStatus("awaiting_answer");

  await box.run("/plan status");
  await expect(box.result()).toHaveText("Planning “Show the README”: waiting for you — Which README do you mean?");
  await box.run("/plan Something else");
  await expect(box.result()).toContainText("Already planning.");
  await box.run("/deploy now");
  await expect(box.error()).toContainText("The commands are: /plan [task], /plan status, /plan cancel.");
  await box.run("/plan cancel");
  await expect(box.result()).toContainText("Cancelled planning “Show the README”.");
  await session.expectStatus("cancelled");
  expect(await axeViolations(page)).toEqual([]);
});
