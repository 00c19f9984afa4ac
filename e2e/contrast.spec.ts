import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, test, type APIRequestContext, type Locator, type Page } from "@playwright/test";
import { goodPlan } from "../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../tests/scripted-llm";
import { E2E_LLM_PORT, E2E_PORT, E2E_STATE_FILE } from "./e2e-env";
import { axeViolations } from "./pages/accessibility";
import { createPlanViaApi, PlanViewPage } from "./pages/plan-pages";
import { PlanCommandBox, PlanningSessionPage } from "./pages/planner-pages";
import { RunViewPage, startRunViaApi } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";

/**
 * Contrast and accessibility of every page in its main states, in the light and the dark colour
 * scheme: axe finds no serious or critical violation, every button on the page (disabled ones
 * too, which axe skips) is readable at 4.5:1 (WCAG AA), each button variant stays readable when
 * hovered, dark mode really changes the page, and a page stylesheet loaded by one page does not
 * restyle another page's buttons.
 *
 * The plans, runs and planning sessions are made once (beforeAll) and looked at in both schemes.
 */
const SCHEMES = ["light", "dark"] as const;
type Scheme = (typeof SCHEMES)[number];

/**
 * The contrast of each element's text against what is behind it: its own background, or the
 * first ancestor's that is not transparent (quiet buttons and tabs have none of their own). Runs
 * in the page, so it is self-contained; hidden elements are left out.
 */
function contrasts(nodes: Element[]): { label: string; className: string; ratio: number }[] {
  const rgba = (value: string) => (value.match(/[\d.]+/g) ?? ["0", "0", "0", "0"]).map(Number);
  const luminance = ([r, g, b]: number[]) => {
    const [R, G, B] = [r!, g!, b!].map((value) => {
      const channel = value / 255;
      return channel <= 0.03928 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4;
    });
    return 0.2126 * R! + 0.7152 * G! + 0.0722 * B!;
  };
  return nodes
    .filter((node) => node.checkVisibility())
    .map((node) => {
      let background = [255, 255, 255];
      for (let current: Element | null = node; current; current = current.parentElement) {
        const value = rgba(getComputedStyle(current).backgroundColor);
        if (value.length < 4 || value[3]! > 0) {
          background = value;
          break;
        }
      }
      const [a, b] = [luminance(rgba(getComputedStyle(node).color)), luminance(background)];
      return {
        label: node.getAttribute("aria-label") ?? (node.textContent ?? "").trim(),
        className: node.getAttribute("class") ?? "",
        ratio: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05),
      };
    });
}

async function contrastOf(element: Locator): Promise<number> {
  await expect(element).toBeVisible();
  const [measured] = await element.evaluateAll(contrasts);
  return measured!.ratio;
}

/** Every visible button (and link styled as one) whose text is below 4.5:1, with its contrast. */
async function unreadableButtons(page: Page): Promise<string[]> {
  const measured = await page.locator("button, .button").evaluateAll(contrasts);
  return measured
    .filter(({ ratio }) => ratio < 4.5)
    .map(({ label, className, ratio }) => `${label} (${className}): ${ratio.toFixed(2)}`);
}

/** The whole check for one page state. */
async function expectAccessible(page: Page) {
  // Wait for React Flow to have drawn, and for no loading placeholders.
  await expect(page.locator("[aria-busy='true']")).toHaveCount(0);
  expect(await axeViolations(page, { seriousOnly: true })).toEqual([]);
  expect(await unreadableButtons(page)).toEqual([]);
}

async function expectReadableAtRestAndHovered(page: Page, button: Locator) {
  await expect(button).toBeVisible();
  expect(await contrastOf(button)).toBeGreaterThanOrEqual(4.5);
  await button.hover();
  expect(await contrastOf(button)).toBeGreaterThanOrEqual(4.5);
  await page.mouse.move(0, 0);
}

async function sessionStatus(request: APIRequestContext, sessionId: string): Promise<string> {
  const response = await request.get(
    `/api/trpc/planner.session?input=${encodeURIComponent(JSON.stringify({ json: { sessionId } }))}`,
  );
  return ((await response.json()).result?.data.json.status as string) ?? "unknown";
}

/** Names made unique per setup, so a rerun of beforeAll (after a failure) finds only its own. */
const tag = Date.now().toString(36);

const PLAN = {
  goal: `Tidy the docs ${tag}`,
  summary: "Read, rewrite and commit the docs",
  steps: [
    { id: "step_1", description: "Read the README", tool: "read_file", args: { path: "README.md" } },
    {
      id: "step_2",
      description: "Rewrite the README",
      tool: "write_file",
      args: { path: "README.md", content: "# Docs\n" },
      dependsOn: ["step_1"],
    },
    { id: "step_3", description: "Say it is done", tool: "echo", args: { value: "done" }, dependsOn: ["step_2"] },
  ],
};

let llm: ScriptedLlm | undefined;
let fixtures: {
  planId: string;
  emptyPlanId: string;
  gateRunId: string;
  runningRunId: string;
  failedRunId: string;
  agentRunId: string;
  questionSessionId: string;
  failedSessionId: string;
  templatePlanId: string;
  submittedSessionId: string;
  rejectedSessionId: string;
  archivedPlanId: string;
};

/**
 * Answers one procedure of a (possibly batched) tRPC GET with `value` and lets the others through,
 * so a page's state without data can be shown whatever else the page loads in the same batch.
 */
async function answerProcedure(page: Page, procedure: string, value: unknown) {
  await page.route(
    (url) => url.pathname.startsWith("/api/trpc/") && url.pathname.split("/").pop()!.split(",").includes(procedure),
    async (route) => {
      const response = await route.fetch();
      const body = await response.json();
      const names = new URL(route.request().url()).pathname.split("/").pop()!.split(",");
      const results = Array.isArray(body) ? body : [body];
      names.forEach((name, index) => {
        if (name === procedure) results[index] = { result: { data: { json: value } } };
      });
      await route.fulfill({ response, json: Array.isArray(body) ? results : results[0] });
    },
  );
}

test.beforeAll(async ({ playwright }) => {
  test.setTimeout(120_000);
  llm = await startScriptedLlm({ port: E2E_LLM_PORT });
  const request = await playwright.request.newContext({
    baseURL: `http://127.0.0.1:${E2E_PORT}`,
    storageState: E2E_STATE_FILE,
  });
  try {
    const planId = await createPlanViaApi(request, PLAN);
    const emptyPlanId = await createPlanViaApi(request, { goal: "Nothing yet", steps: [] });
    const gateRunId = await startRunViaApi(request, "Gate and wait", {
      steps: [
        { id: "step_1", description: "Write a file", tool: "write_file", args: { path: "gate.txt", content: "x" } },
        { id: "step_2", description: "After it", tool: "echo", args: { value: 1 }, dependsOn: ["step_1"] },
      ],
    });
    const runningRunId = await startRunViaApi(request, "Sleep a long time", {
      steps: [
        { id: "step_1", description: "Say hello", tool: "echo", args: { value: "hello" } },
        // An hour (the tool's most): the fixtures serve both schemes' tests, and on a slow machine
        // the dark scheme's came more than ten minutes after this run started.
        { id: "step_2", description: "Sleep long", tool: "sleep", args: { ms: 3_600_000 }, dependsOn: ["step_1"] },
      ],
    });
    const failedRunId = await startRunViaApi(request, `Read a missing file ${tag}`, {
      steps: [{ id: "step_1", description: "Read the config", tool: "read_file", args: { path: "missing.json" } }],
    });

    const started = await request.post("/api/ops/agent.start", { data: { goal: `Accessible session ${tag}` } });
    expect(started.ok()).toBe(true);
    await request.post("/api/ops/agent.status", { data: {} });
    await request.post("/api/ops/agent.alert", {
      data: { alert: { id: "lint_red", level: "blocker", message: "Lint fails", task_id: 1 } },
    });
    const sessions = (await (await request.get("/api/trpc/agents.list")).json()).result.data.json as {
      goal: string;
      runId: string;
    }[];
    const agentRunId = sessions.find((session) => session.goal === `Accessible session ${tag}`)!.runId;

    // A planning session waiting for an answer, then one whose provider failed.
    llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Which README?" } }] });
    const question = await trpc<{ sessionId: string }>(request, "planner.start", {
      goal: "Show the README",
      mode: "deep",
    });
    await expect.poll(() => sessionStatus(request, question.sessionId)).toBe("awaiting_answer");
    llm.script({ status: 500, body: '{"error":{"message":"upstream exploded"}}' });
    const failed = await trpc<{ sessionId: string }>(request, "planner.start", { goal: "Show the README" });
    await expect.poll(() => sessionStatus(request, failed.sessionId)).toBe("failed");

    const templatePlanId = await createPlanViaApi(request, {
      goal: `Deploy {{service}} ${tag}`,
      steps: [{ id: "step_1", description: "Announce {{service}}", tool: "echo", args: { value: "{{service}}" } }],
    });
    await trpc(request, "templates.save", {
      planId: templatePlanId,
      name: `Deploy template ${tag}`,
      description: "Deploy one service",
      parameters: [{ name: "service", label: "Service", default: "api" }],
    });

    // Planning sessions whose plans wait for review, and one rejected; an archived plan.
    const submitted: string[] = [];
    for (const goal of [`Review me ${tag}`, `Reject me ${tag}`]) {
      llm.script({ json: goodPlan });
      const { sessionId } = await trpc<{ sessionId: string }>(request, "planner.start", { goal });
      await expect.poll(() => sessionStatus(request, sessionId)).toBe("completed");
      submitted.push(sessionId);
    }
    const toReject = (
      await (
        await request.get(
          `/api/trpc/planner.session?input=${encodeURIComponent(JSON.stringify({ json: { sessionId: submitted[1] } }))}`,
        )
      ).json()
    ).result.data.json as { planId: string };
    await trpc(request, "plans.review", { planId: toReject.planId, version: 1, decision: "reject", comment: "No" });
    const archivedPlanId = await createPlanViaApi(request, { goal: `Archived ${tag}`, steps: PLAN.steps });
    await trpc(request, "plans.archive", { planId: archivedPlanId });

    fixtures = {
      templatePlanId,
      planId,
      emptyPlanId,
      gateRunId,
      runningRunId,
      failedRunId,
      agentRunId,
      questionSessionId: question.sessionId,
      failedSessionId: failed.sessionId,
      submittedSessionId: submitted[0]!,
      rejectedSessionId: submitted[1]!,
      archivedPlanId,
    };
  } finally {
    await request.dispose();
  }
});

test.afterAll(async ({ playwright }) => {
  const request = await playwright.request.newContext({
    baseURL: `http://127.0.0.1:${E2E_PORT}`,
    storageState: E2E_STATE_FILE,
  });
  try {
    // Leave nothing running for the specs after this one.
    if (fixtures) {
      await request.post("/api/trpc/runs.cancel", { data: { json: { runId: fixtures.runningRunId } } });
      await request.post("/api/trpc/planner.cancel", { data: { json: { sessionId: fixtures.questionSessionId } } });
    }
  } finally {
    await request.dispose();
    await llm?.close();
  }
});

for (const scheme of SCHEMES) {
  test.describe(`${scheme} scheme`, () => {
    // One page for the scheme's tests, one after another: a context of its own per test loaded the
    // app with an empty cache every time (2.3–2.7 s a test near idle, most of what a test took once
    // axe ran in the page). Each test starts from a page.goto and leaves no routes behind.
    test.describe.configure({ mode: "serial" });
    let page: Page;
    test.beforeAll(async ({ browser }) => {
      const context = await browser.newContext({
        baseURL: `http://127.0.0.1:${E2E_PORT}`,
        storageState: E2E_STATE_FILE,
        colorScheme: scheme,
      });
      page = await context.newPage();
      // The scheme is the context's: make sure the pages below are really seen in it.
      expect(await page.evaluate(() => matchMedia("(prefers-color-scheme: dark)").matches)).toBe(scheme === "dark");
    });
    test.afterEach(async () => {
      await page.unrouteAll({ behavior: "ignoreErrors" });
      await page.mouse.move(0, 0);
    });
    test.afterAll(async () => {
      await page.context().close();
    });

    test(`plans list, empty and with plans (${scheme})`, async () => {
      await page.goto("/");
      await expect(page.getByRole("link", { name: PLAN.goal })).toBeVisible();
      await expectAccessible(page);

      // The list as a new installation shows it: the server's answer without its plans.
      await answerProcedure(page, "plans.list", []);
      await page.goto("/");
      await expect(page.getByText("No plans yet.")).toBeVisible();
      await expectAccessible(page);
    });

    test(`plan page: list, step editor, delete confirmation, graph, history, no steps (${scheme})`, async () => {
      const view = new PlanViewPage(page);
      await view.open(fixtures.planId);
      await expectAccessible(page);

      await view.edit("step_2");
      await expectAccessible(page);
      await view.editor("step_2").getByRole("button", { name: "Cancel" }).click();

      await view.step("step_3").getByRole("button", { name: "Delete step_3" }).click();
      await expect(page.getByRole("group", { name: "Confirm deleting step_3" })).toBeVisible();
      await expectAccessible(page);
      await page.getByRole("group", { name: "Confirm deleting step_3" }).getByRole("button", { name: "Keep" }).click();

      await page.getByRole("button", { name: "History" }).click();
      await expectAccessible(page);

      await page.getByRole("button", { name: "Graph", exact: true }).click();
      await expect(page.locator("[data-graph-step='step_3']")).toBeVisible();
      await expectAccessible(page);

      await view.open(fixtures.emptyPlanId);
      await expect(page.getByTestId("validation-banner")).toBeVisible();
      await expectAccessible(page);
    });

    test(`new plan form, new task form, settings and API docs (${scheme})`, async () => {
      for (const [path, heading] of [
        ["/new", "Start a new plan"],
        ["/plans/new", "New plan"],
        ["/tasks/new", "New task"],
        ["/settings", /Settings/],
        ["/docs/api", /API/],
      ] as const) {
        await page.goto(path);
        await expect(page.getByRole("heading", { level: 1, name: heading })).toBeVisible();
        await expectAccessible(page);
      }
    });

    test(`templates: list, start form, delete confirmation, empty, save form (${scheme})`, async () => {
      await page.goto("/templates");
      const card = page.getByTestId("template").filter({ hasText: `Deploy template ${tag}` });
      await expect(card).toBeVisible();
      await expectAccessible(page);
      await card.getByRole("button", { name: "Use template" }).click();
      await expect(card.getByLabel(/Service/)).toBeVisible();
      await card.getByRole("button", { name: "Delete" }).click();
      await expectReadableAtRestAndHovered(page, card.getByRole("button", { name: "Delete for good" }));
      await expectAccessible(page);

      await answerProcedure(page, "templates.list", { templates: [] });
      await page.goto("/templates");
      await expect(page.getByTestId("no-templates")).toBeVisible();
      await expectAccessible(page);

      const view = new PlanViewPage(page);
      await view.open(fixtures.templatePlanId);
      await page.getByRole("button", { name: "Save as template" }).click();
      await expect(page.getByTestId("template-parameter")).toBeVisible();
      await expectAccessible(page);
    });

    test(`workspaces page renaming and confirming a removal, and the audit log filtered (${scheme})`, async () => {
      const directory = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-contrast-ws-"));
      const { id } = await trpc<{ id: string }>(page.request, "workspaces.register", { path: directory });
      try {
        await page.goto("/workspaces");
        await expect(page.getByRole("table", { name: "Registered workspaces" })).toBeVisible();
        await expectAccessible(page);
        const row = page.locator(`tr[data-workspace-id="${id}"]`);
        await row.getByRole("button", { name: "Rename" }).click();
        await row.getByRole("button", { name: "Remove…" }).click();
        await expect(row.getByRole("group", { name: /Confirm removing/ })).toBeVisible();
        await expectAccessible(page);
        await expectReadableAtRestAndHovered(page, row.getByRole("button", { name: "Remove", exact: true }));
      } finally {
        await trpc(page.request, "workspaces.remove", { workspaceId: id });
        await fs.rm(directory, { recursive: true, force: true });
      }

      await page.goto("/audit");
      await expect(page.getByRole("table", { name: "Audit entries" })).toBeVisible();
      await expectAccessible(page);
      await page.goto(`/audit?run=${fixtures.gateRunId}`);
      await expect(page.locator('tr[data-audit-action="plan.approved"]')).toBeVisible();
      await expectAccessible(page);
      await page.goto("/audit?person=nobody-at-all");
      await expect(page.getByText("No decision matches these filters.")).toBeVisible();
      await expectAccessible(page);
    });

    test(`a run waiting at a gate, with its graph, timeline and events (${scheme})`, async () => {
      const run = new RunViewPage(page);
      await run.open(fixtures.gateRunId);
      await run.expectStepStatus("step_1", "awaiting_approval");
      const item = run.pendingItem("step_1");
      await expectReadableAtRestAndHovered(page, item.getByRole("button", { name: "Approve" }));
      await expectReadableAtRestAndHovered(page, item.getByRole("button", { name: "Deny" }));
      await expectAccessible(page);
      await run.showTab("Graph");
      await expect(page.getByTestId("run-graph").locator(".react-flow__node")).toHaveCount(2);
      await expectAccessible(page);
      await run.showTab("Timeline");
      await expectAccessible(page);
      await run.showTab("Events");
      await expect(run.eventList()).toBeVisible();
      await expectAccessible(page);
      // Every page has an icon for its tab.
      expect(await page.locator('link[rel="icon"]').count()).toBeGreaterThan(0);
    });

    test(`a running run, a failed run and the runs list (${scheme})`, async () => {
      const run = new RunViewPage(page);
      await run.open(fixtures.runningRunId);
      await run.expectStepStatus("step_2", "running");
      await expectAccessible(page);

      await run.open(fixtures.failedRunId);
      await run.expectStepStatus("step_1", "failed");
      await expectAccessible(page);

      await page.goto("/runs");
      await expect(page.getByRole("link", { name: `Read a missing file ${tag}` }).first()).toBeVisible();
      await expectAccessible(page);
      await page
        .getByRole("group", { name: "Filter by state" })
        .getByRole("button", { name: /^failed \(/i })
        .click();
      await expectAccessible(page);
    });

    test(`planning sessions waiting for an answer and failed (${scheme})`, async () => {
      const session = new PlanningSessionPage(page);
      await page.goto(`/tasks/${fixtures.questionSessionId}`);
      await session.expectStatus("awaiting_answer");
      await expectAccessible(page);
      // The /plan command box with a result, then with an error.
      const box = new PlanCommandBox(page);
      await box.run("/plan status");
      await expect(box.result()).toContainText("waiting for you");
      await expectAccessible(page);
      await box.run("/nope");
      await expect(box.error()).toBeVisible();
      await expectAccessible(page);
      await page.goto(`/tasks/${fixtures.failedSessionId}`);
      await session.expectStatus("failed");
      await expect(session.failure()).toBeVisible();
      await expectAccessible(page);
    });

    test(`planning sessions with a plan to review and a rejected one; an archived plan (${scheme})`, async () => {
      await page.goto(`/tasks/${fixtures.submittedSessionId}`);
      await expect(page.getByRole("group", { name: "Decide on the plan" })).toBeVisible();
      await expectAccessible(page);
      await page.goto(`/tasks/${fixtures.rejectedSessionId}`);
      await expect(page.getByTestId("session-state")).toHaveText("Rejected");
      await expectAccessible(page);
      await new PlanViewPage(page).open(fixtures.archivedPlanId);
      await expect(page.getByTestId("plan-set-aside")).toBeVisible();
      await expectAccessible(page);
      await page.goto("/");
      await page.getByRole("group", { name: "Show plans" }).getByRole("button", { name: "Archived" }).click();
      await expect(page.getByRole("link", { name: `Archived ${tag}` })).toBeVisible();
      await expectAccessible(page);
    });

    test(`planning list and inbox, with items and empty (${scheme})`, async () => {
      await page.goto("/planning");
      await expect(page.locator(`tr[data-session-id="${fixtures.questionSessionId}"]`)).toBeVisible();
      await expectAccessible(page);
      await page.goto("/inbox");
      await expect(page.locator("[data-kind='planning_question']").first()).toBeVisible();
      await expect(page.locator("[data-kind='step_approval']").first()).toBeVisible();
      await expect(page.locator("[data-kind='plan_review']").first()).toBeVisible();
      await expect(page.locator("[data-kind='agent_blocker']").first()).toBeVisible();
      await expectAccessible(page);

      await answerProcedure(page, "planning.list", {
        sessions: [],
        counts: { gathering: 0, waiting: 0, submitted: 0, approved: 0, rejected: 0, cancelled: 0, failed: 0 },
      });
      await answerProcedure(page, "inbox.list", { items: [], count: 0 });
      await page.goto("/planning");
      await expect(page.getByText("No planning sessions yet.")).toBeVisible();
      await expectAccessible(page);
      await page.goto("/inbox");
      await expect(page.getByText("Nothing waits for you.")).toBeVisible();
      await expectAccessible(page);
    });

    test(`an agent session's run with a blocker (${scheme})`, async () => {
      const run = new RunViewPage(page);
      await run.open(fixtures.agentRunId);
      const clear = page.getByRole("button", { name: "Clear signal lint_red" });
      await expectReadableAtRestAndHovered(page, clear);
      await expectAccessible(page);
    });

    test(`every button variant is readable at rest and hovered (${scheme})`, async () => {
      const view = new PlanViewPage(page);
      await view.open(fixtures.planId);
      // default, primary, pressed toggle, disabled (axe skips disabled buttons; people still read them)
      await expectReadableAtRestAndHovered(page, page.getByRole("button", { name: "Add step" }));
      await expectReadableAtRestAndHovered(page, page.getByRole("button", { name: /Approve and run/ }));
      const list = page.getByRole("button", { name: "List", exact: true });
      await expect(list).toHaveAttribute("aria-pressed", "true");
      await expectReadableAtRestAndHovered(page, list);
      const undo = page.getByRole("button", { name: "Undo last edit" });
      await expect(undo).toBeDisabled();
      await expectReadableAtRestAndHovered(page, undo);
      // the small drag handle, and danger
      await expectReadableAtRestAndHovered(page, view.dragHandle("step_1"));
      await view.step("step_3").getByRole("button", { name: "Delete step_3" }).click();
      await expectReadableAtRestAndHovered(
        page,
        page.getByRole("group", { name: "Confirm deleting step_3" }).getByRole("button", { name: "Delete" }),
      );
      // a link that looks like a primary button
      await page.goto("/");
      await expectReadableAtRestAndHovered(page, page.getByRole("link", { name: "New plan" }).last());
      // tabs and the quiet (link-like) button
      const run = new RunViewPage(page);
      await run.open(fixtures.gateRunId);
      await expectReadableAtRestAndHovered(page, page.getByRole("tab", { name: "Steps" }));
      await expectReadableAtRestAndHovered(page, page.getByRole("tab", { name: "Graph" }));
      await run.showTab("Events");
      await expectReadableAtRestAndHovered(page, page.getByRole("button", { name: /Show the \d+ earlier events/ }));
    });
  });
}

async function colours(page: Page, scheme: Scheme) {
  await page.emulateMedia({ colorScheme: scheme });
  return page.evaluate(() => {
    const primary = document.querySelector(".button.primary")!;
    return {
      page: getComputedStyle(document.documentElement).backgroundColor,
      text: getComputedStyle(document.body).color,
      primary: getComputedStyle(primary).backgroundColor,
    };
  });
}

test("dark mode follows the system: the page, its text and its buttons change colour", async ({ page }) => {
  await page.goto("/");
  await expect(page.getByRole("link", { name: PLAN.goal })).toBeVisible();
  const light = await colours(page, "light");
  const dark = await colours(page, "dark");
  expect(dark.page).not.toBe(light.page);
  expect(dark.text).not.toBe(light.text);
  expect(dark.primary).not.toBe(light.primary);
  const brightness = (value: string) =>
    value
      .match(/\d+/g)!
      .slice(0, 3)
      .map(Number)
      .reduce((sum, channel) => sum + channel, 0) / 3;
  expect(brightness(light.page)).toBeGreaterThan(200);
  expect(brightness(dark.page)).toBeLessThan(50);
  // Form controls follow the scheme too.
  expect(await page.evaluate(() => getComputedStyle(document.documentElement).colorScheme)).toBe("light dark");
});

test("the runs pages' stylesheet does not restyle other pages' buttons after a visit", async ({ page }) => {
  const danger = () =>
    page.getByRole("group", { name: "Confirm deleting step_3" }).getByRole("button", { name: "Delete" });
  const look = (button: Locator) =>
    button.evaluate((element) => {
      const style = getComputedStyle(element);
      return [style.color, style.backgroundColor, getComputedStyle(element.parentElement!).backgroundColor];
    });
  const view = new PlanViewPage(page);
  await view.open(fixtures.planId);
  await view.step("step_3").getByRole("button", { name: "Delete step_3" }).click();
  const fresh = await look(danger());

  // A run page loads runs.css; from there the browser navigates without reloading.
  await new RunViewPage(page).open(fixtures.gateRunId);
  await page.getByRole("banner").getByRole("link", { name: "Plans" }).click();
  await page.getByRole("link", { name: PLAN.goal }).first().click();
  await expect(page.getByTestId("plan-version")).toBeVisible();
  // runs.css is still in the page (else this test would prove nothing).
  expect(
    await page.evaluate(() =>
      [...document.styleSheets].some((sheet) => [...sheet.cssRules].some((rule) => rule.cssText.includes(".run-step"))),
    ),
  ).toBe(true);
  await view.step("step_3").getByRole("button", { name: "Delete step_3" }).click();
  expect(await look(danger())).toEqual(fresh);
  expect(await contrastOf(danger())).toBeGreaterThanOrEqual(4.5);
});
