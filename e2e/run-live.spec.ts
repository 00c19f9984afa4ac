import { expect, test, type Page } from "@playwright/test";
import { RunViewPage, startRunViaApi } from "./pages/run-pages";
import { query } from "./pages/trpc-api";

/** Asserts that the event list covers 1..last with every number exactly once, in order. */
async function expectCompleteEventList(run: RunViewPage) {
  await run.showTab("Events");
  await run.showEarlierEvents();
  const list = run.eventList();
  await expect(list).toHaveAttribute("data-duplicates", "0");
  await expect(list).toHaveAttribute("data-gap", "false");
  const last = Number(await list.getAttribute("data-last-seq"));
  const seqs = await run.eventSeqs();
  expect(seqs).toEqual(Array.from({ length: last }, (_, i) => i + 1));
  return seqs;
}

test("parallel sleeping steps are seen running together, with progress moving, until the run completes", async ({
  page,
  request,
}) => {
  // The sleepers wait behind a gate until the page is open and live, however slow the machine.
  const runId = await startRunViaApi(request, "Three sleepers and a join", {
    steps: [
      { id: "step_0", description: "Start", tool: "echo", args: { value: "go" }, approvalRequired: true },
      { id: "step_1", description: "Sleep A", tool: "sleep", args: { ms: 5000 }, dependsOn: ["step_0"] },
      { id: "step_2", description: "Sleep B", tool: "sleep", args: { ms: 5000 }, dependsOn: ["step_0"] },
      { id: "step_3", description: "Sleep C", tool: "sleep", args: { ms: 5000 }, dependsOn: ["step_0"] },
      {
        id: "step_4",
        description: "Join",
        tool: "echo",
        args: { value: "done" },
        dependsOn: ["step_1", "step_2", "step_3"],
      },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  const loads: string[] = [];
  page.on("load", () => loads.push(page.url()));
  await run.expectStepStatus("step_0", "awaiting_approval");
  await expect(run.connection()).toHaveText("live");
  const approved = await request.post("/api/trpc/runs.decide", {
    data: { json: { runId, stepId: "step_0", approve: true } },
  });
  expect(approved.ok()).toBe(true);

  // All three sleepers run at once; the join waits.
  await expect(run.count("running")).toHaveAttribute("data-count", "3");
  await run.expectStepStatuses({ step_1: "running", step_2: "running", step_3: "running", step_4: "pending" });
  await expect(run.connection()).toHaveText("live");

  // Progress moves while they run: two different readings of one bar.
  const bar = run.step("step_1").getByRole("progressbar");
  await expect(bar).toHaveAttribute("aria-valuenow", /^[1-9]\d*$/);
  const first = Number(await bar.getAttribute("aria-valuenow"));
  await expect.poll(async () => Number(await bar.getAttribute("aria-valuenow"))).toBeGreaterThan(first);
  await expect(run.step("step_1").getByTestId("attempt")).toHaveText("attempt 1");

  await run.expectRunStatus("completed");
  for (const id of ["step_0", "step_1", "step_2", "step_3", "step_4"]) await run.expectStepStatus(id, "completed");
  await expect(run.step("step_4").getByTestId("result")).toHaveText('"done"');
  await expect(run.count("completed")).toHaveAttribute("data-count", "5");
  await expect(run.run().getByRole("progressbar")).toHaveAttribute("aria-valuenow", "100");
  await expect(run.connection()).toHaveText("finished");

  // The timeline shows the three sleepers overlapping and a critical path ending in the join.
  await run.showTab("Timeline");
  await expect(page.getByTestId("timeline").locator(".gantt-row")).toHaveCount(5);
  await expect(page.getByTestId("critical-path")).toHaveText(/→ step_4$/);
  // The graph colours every node by its final state.
  await run.showTab("Graph");
  await expect(page.locator(".react-flow__node.status-completed")).toHaveCount(5);
  // Nodes rebuilt by every event keep their size, so all of them stay drawn.
  for (const node of await page.locator(".react-flow__node").all()) await expect(node).toBeVisible();

  await expectCompleteEventList(run);
  expect(loads).toEqual([]);
});

test("approving one gated step and denying another: dependents run, or are skipped when they need the denied output", async ({
  page,
  request,
}) => {
  const runId = await startRunViaApi(request, "Two gates", {
    steps: [
      { id: "step_1", description: "Gate A", tool: "echo", args: { value: "a" }, approvalRequired: true },
      { id: "step_2", description: "Gate B", tool: "echo", args: { value: "b" }, approvalRequired: true },
      { id: "step_3", description: "Uses A", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
      { id: "step_4", description: "Uses B's output", tool: "echo", args: { value: "$step_2" }, dependsOn: ["step_2"] },
      {
        id: "step_5",
        description: "After B, without its output",
        tool: "echo",
        args: { value: 5 },
        dependsOn: ["step_2"],
      },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  await expect(run.pending().locator("li")).toHaveCount(2);
  await expect(run.pending().getByTestId("time-left").first()).toContainText(/ left(;|$)/);
  await expect(page).toHaveTitle(/^\(2\) Two gates/);

  // Each entry shows what would run and decides in place; the step cards only point to it.
  await expect(run.pendingItem("step_1")).toContainText("Runs echo with");
  await expect(run.pendingItem("step_1")).toContainText('"value": "a"');
  await expect(run.step("step_1").getByRole("button", { name: "Approve" })).toHaveCount(0);
  await run.step("step_1").getByRole("link", { name: "decide in “Waiting for you”" }).click();
  await expect(page).toHaveURL(/#pending-step_1$/);
  await run.decide("step_1", true, "looks right");
  await run.expectStepStatus("step_3", "completed");
  await expect(run.step("step_1").getByTestId("decision")).toHaveText("Approved by user: “looks right”");
  await expect(page).toHaveTitle(/^\(1\) Two gates/);

  await run.decide("step_2", false, "not today");
  await run.expectStepStatus("step_2", "skipped");
  await expect(run.step("step_2").getByTestId("reason")).toContainText("not today");
  await run.expectStepStatus("step_4", "skipped");
  await expect(run.step("step_4").getByTestId("reason")).toContainText("step_2");
  await run.expectStepStatus("step_5", "completed");
  await expect(run.pending()).toHaveCount(0);
  await expect(page).toHaveTitle(/^Two gates/);
  await run.expectRunStatus("completed");

  // A reload shows the stored decisions.
  await page.reload();
  await expect(run.step("step_2").getByTestId("decision")).toHaveText("Denied by user: “not today”");
});

test("an ask_user question is answered in the page and its answer flows to the dependent step", async ({
  page,
  request,
}) => {
  const runId = await startRunViaApi(request, "Ask first", {
    steps: [
      {
        id: "step_1",
        description: "Which colour?",
        tool: "ask_user",
        args: { question: "Which colour?", choices: ["red", "blue"] },
      },
      { id: "step_2", description: "Use the answer", tool: "echo", args: { value: "$step_1" }, dependsOn: ["step_1"] },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.expectStepStatus("step_1", "awaiting_input");
  await expect(run.pending()).toContainText("Question");
  await expect(page).toHaveTitle(/^\(1\) Ask first/);
  await expect(run.step("step_1").getByTestId("decide-above")).toContainText("Waiting for your answer");
  await run.pendingItem("step_1").getByRole("button", { name: "blue" }).click();
  await run.expectStepStatus("step_1", "completed");
  await run.expectStepStatus("step_2", "completed");
  await expect(run.step("step_2").getByTestId("result")).toHaveText('"blue"');
  await run.expectRunStatus("completed");
});

test("cancelling a running run aborts its running steps and cancels the rest; the runs list filters it", async ({
  page,
  request,
}) => {
  // Sleeps far longer than any test: with 30 s ones, a busy machine once took that long between
  // the start and the cancel, and the run completed first.
  const runId = await startRunViaApi(request, "Long sleepers", {
    steps: [
      { id: "step_1", description: "Sleep long", tool: "sleep", args: { ms: 600_000 } },
      { id: "step_2", description: "Sleep long too", tool: "sleep", args: { ms: 600_000 } },
      { id: "step_3", description: "After", tool: "echo", args: { value: 1 }, dependsOn: ["step_1"] },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.expectStepStatus("step_1", "running");
  await run.cancelRun();
  await run.expectRunStatus("cancelled");
  for (const id of ["step_1", "step_2", "step_3"]) await run.expectStepStatus(id, "cancelled");
  await expect(run.step("step_1").getByTestId("reason")).toContainText("Cancelled by user");
  await expect(page.getByRole("button", { name: "Cancel run…" })).toHaveCount(0);

  await page.getByRole("link", { name: "All runs" }).click();
  const list = page.getByRole("region", { name: "Runs" });
  await list.getByRole("button", { name: /^cancelled \(\d+\)$/ }).click();
  await expect(list.locator(`tr[data-run-id="${runId}"]`)).toBeVisible();
  await expect(list.locator("tbody tr:not([data-status='cancelled'])")).toHaveCount(0);
  await list.getByRole("button", { name: /^completed \(\d+\)$/ }).click();
  await list.getByRole("button", { name: /^cancelled \(\d+\)$/ }).click();
  await expect(list.locator(`tr[data-run-id="${runId}"]`)).toHaveCount(0);
});

/**
 * A run that makes events for a while: a gate, then a chain of short sleeps (each reports progress).
 * The gate holds the chain until the page(s) watch, so a slow page load cannot miss the step the
 * test observes; that step sleeps long enough to be seen running on every page.
 */
const gatedChainOfSleeps = (length: number, observed: string) => ({
  steps: [
    { id: "gate", description: "Start the chain", tool: "echo", args: { value: "go" }, approvalRequired: true },
    ...Array.from({ length }, (_, i) => ({
      id: `step_${i + 1}`,
      description: `Sleep ${i + 1}`,
      tool: "sleep",
      args: { ms: `step_${i + 1}` === observed ? 4000 : 700 },
      dependsOn: [i ? `step_${i}` : "gate"],
    })),
  ],
});

test("after going offline and back, and after a reload mid-run, the event list has no gap and no duplicate", async ({
  page,
  context,
  request,
}) => {
  const runId = await startRunViaApi(request, "Reconnecting", gatedChainOfSleeps(20, "step_2"));
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.decide("gate", true);
  await run.expectStepStatus("step_2", "running");

  await context.setOffline(true);
  // The page closes the stream and says so; the run goes on without it.
  await expect(run.connection()).toHaveText(/^offline/);
  // The run moves on while the page is offline: step_2 completes, so the page has events to catch
  // up on when it is back (however slowly the machine runs the steps; no fixed wait).
  await expect
    .poll(
      async () => {
        const { steps } = await query<{ steps: { stepId: string; status: string }[] }>(request, "runs.get", { runId });
        return steps.find((step) => step.stepId === "step_2")?.status;
      },
      { timeout: 30_000 },
    )
    .toBe("completed");
  await context.setOffline(false);
  await expect(run.connection()).toHaveText("live");
  await run.showTab("Events");
  // Events received so far, across the drop: consecutive from the snapshot on.
  const list = run.eventList();
  const snapshotSeq = Number(await list.getAttribute("data-snapshot-seq"));
  const beforeReload = await run.eventSeqs();
  expect(beforeReload).toEqual(Array.from({ length: beforeReload.length }, (_, i) => snapshotSeq + 1 + i));
  await expect(list).toHaveAttribute("data-duplicates", "0");

  await page.reload();
  await run.expectRunStatus("running"); // the reload happened mid-run
  await run.showTab("Events");
  await run.expectRunStatus("completed");
  await expectCompleteEventList(run);
});

test("two pages watching one run see the same states and the same events", async ({ page, context, request }) => {
  const runId = await startRunViaApi(request, "Watched twice", gatedChainOfSleeps(10, "step_3"));
  const second = await context.newPage();
  const one = new RunViewPage(page);
  const two = new RunViewPage(second);
  await Promise.all([one.open(runId), two.open(runId)]);
  await one.decide("gate", true);
  await two.expectStepStatus("step_3", "running");
  await one.expectStepStatus("step_3", "running");
  await Promise.all([one.expectRunStatus("completed"), two.expectRunStatus("completed")]);
  const [a, b] = await Promise.all([expectCompleteEventList(one), expectCompleteEventList(two)]);
  expect(a).toEqual(b);
  const states = (p: Page) =>
    p.locator("li.run-step[data-step-id]").evaluateAll((items) => items.map((i) => i.getAttribute("data-status")));
  await one.showTab("Steps");
  await two.showTab("Steps");
  expect(await states(page)).toEqual(await states(second));
});

test("a 1,000-step run renders only the cards near the viewport, and links still reach any step", async ({
  page,
  request,
}) => {
  const steps = Array.from({ length: 1_000 }, (_, i) => ({
    id: `step_${i + 1}`,
    description: `Echo ${i + 1}`,
    tool: "echo",
    args: { value: i + 1 },
    // The last step waits for a person, so "Waiting for you" links to a card far below the fold.
    ...(i === 999 && { approvalRequired: true }),
  }));
  const runId = await startRunViaApi(request, "A thousand steps", { steps });
  const run = new RunViewPage(page);
  await run.open(runId);
  await expect(run.pendingItem("step_1000")).toBeVisible({ timeout: 30_000 });
  await expect(page.locator('[data-virtual-count="1000"]')).toBeVisible();
  const rendered = await page.locator("li.run-step").count();
  expect(rendered).toBeGreaterThan(0);
  expect(rendered).toBeLessThan(60);
  // Assistive technology is told where each rendered card sits among all of them.
  await expect(run.step("step_1")).toHaveAttribute("aria-setsize", "1000");
  await expect(run.step("step_1000")).toHaveCount(0);

  await run.pendingItem("step_1000").getByRole("link").click();
  await expect(run.step("step_1000")).toBeInViewport();
  await expect(run.step("step_1000")).toBeFocused();
  await expect(run.step("step_1")).toHaveCount(0);

  // Deciding scrolls back up to "Waiting for you"; the run finishes live.
  await run.decide("step_1000", true);
  await run.expectRunStatus("completed");
  await expect(run.step("step_1")).toHaveAttribute("data-status", "completed");

  // A pasted link lands on its card once the run has loaded.
  await page.goto("about:blank");
  await page.goto(`/runs/${runId}#step-step_1000`);
  await expect(run.step("step_1000")).toBeInViewport();
  await run.expectStepStatus("step_1000", "completed");
});

test("seven tabs follow seven runs live over one shared connection (a browser allows six per host)", async ({
  context,
  request,
}) => {
  test.setTimeout(180_000); // seven live pages on a 2-core machine
  const tabs = 7;
  const runIds: string[] = [];
  for (let i = 1; i <= tabs; i++) {
    runIds.push(
      await startRunViaApi(request, `Tab ${i}`, {
        steps: [{ id: "step_1", description: `Gate ${i}`, tool: "echo", args: { value: i }, approvalRequired: true }],
      }),
    );
  }
  const views: RunViewPage[] = [];
  for (const runId of runIds) {
    const view = new RunViewPage(await context.newPage());
    await view.open(runId);
    await view.expectStepStatus("step_1", "awaiting_approval");
    views.push(view);
  }
  // Every tab's stream is open before anything happens; then only live events can move them.
  for (const view of views) await expect(view.connection()).toHaveText(/live/);
  const live = await views.at(-1)!.page.evaluate(() => window.__stepwiseLive);
  expect(live).toEqual({ relayed: true, clients: tabs });

  for (const runId of runIds) {
    const response = await request.post("/api/trpc/runs.decide", {
      data: { json: { runId, stepId: "step_1", approve: true } },
    });
    expect(response.ok()).toBe(true);
  }
  for (const view of views) await view.expectRunStatus("completed");
});

test("opted in, a background tab is notified once when a new step waits for the person", async ({
  page,
  context,
  request,
}) => {
  await context.grantPermissions(["notifications"]);
  await page.addInitScript(() => {
    // Spy on the browser's own Notification, and let the test say when the tab is in the background.
    const shown: { title: string; body?: string; tag?: string }[] = [];
    const real = window.Notification;
    Object.assign(window, { __notifications: shown, __hidden: false });
    window.Notification = new Proxy(real, {
      construct(target, args: [string, NotificationOptions?]) {
        shown.push({ title: args[0], body: args[1]?.body, tag: args[1]?.tag });
        return Reflect.construct(target, args);
      },
    });
    Object.defineProperty(document, "visibilityState", {
      configurable: true,
      get: () => ((window as unknown as { __hidden: boolean }).__hidden ? "hidden" : "visible"),
    });
  });
  const runId = await startRunViaApi(request, "Notify on gates", {
    steps: [
      { id: "step_1", description: "First gate", tool: "echo", args: { value: 1 }, approvalRequired: true },
      {
        id: "step_2",
        description: "Second gate",
        tool: "echo",
        args: { value: 2 },
        approvalRequired: true,
        dependsOn: ["step_1"],
      },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.expectStepStatus("step_1", "awaiting_approval");
  const toggle = page.getByRole("button", { name: /^Notify me/ });
  await toggle.click();
  await expect(page.getByRole("button", { name: /^Notifying you/ })).toHaveAttribute("aria-pressed", "true");

  await page.evaluate(() => Object.assign(window, { __hidden: true }));
  const decided = await request.post("/api/trpc/runs.decide", {
    data: { json: { runId, stepId: "step_1", approve: true } },
  });
  expect(decided.ok()).toBe(true);
  await run.expectStepStatus("step_2", "awaiting_approval");
  const shown = () => page.evaluate(() => (window as unknown as { __notifications: unknown[] }).__notifications);
  // Only the new gate: the first one was on screen when the page opened.
  await expect
    .poll(shown)
    .toEqual([
      { title: "Approval needed · Stepwise", body: "Notify on gates: Second gate", tag: `stepwise-${runId}-step_2` },
    ]);

  // Turned off, it stays off for this browser.
  await page.getByRole("button", { name: /^Notifying you/ }).click();
  await page.reload();
  await expect(page.getByRole("button", { name: /^Notify me/ })).toHaveAttribute("aria-pressed", "false");

  // Opened in the background with a step already waiting: that step is not news.
  await page.getByRole("button", { name: /^Notify me/ }).click();
  await page.addInitScript(() => Object.assign(window, { __hidden: true }));
  await page.reload();
  await run.expectStepStatus("step_2", "awaiting_approval");
  await expect(run.connection()).toHaveText("live");
  expect(await shown()).toEqual([]);
});
