import AxeBuilder from "@axe-core/playwright";
import { expect, test, type Locator, type Page } from "@playwright/test";
import { RunViewPage, startRunViaApi } from "./pages/run-pages";

/**
 * Contrast and accessibility where a person decides: a run waiting at a gate, and an agent
 * session's run with a blocker signal. Axe finds no serious or critical violation, and every
 * button variant on the page is readable (WCAG AA, 4.5:1).
 */
async function seriousViolations(page: Page): Promise<string[]> {
  const results = await new AxeBuilder({ page }).analyze();
  return results.violations
    .filter((violation) => violation.impact === "serious" || violation.impact === "critical")
    .map((violation) => `${violation.id}: ${violation.nodes.map((node) => node.target.join(" ")).join(", ")}`);
}

function luminance([r, g, b]: number[]): number {
  const [R, G, B] = [r!, g!, b!].map((value) => {
    const channel = value / 255;
    return channel <= 0.03928 ? channel / 12.92 : ((channel + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * R! + 0.7152 * G! + 0.0722 * B!;
}

async function contrastOf(button: Locator): Promise<number> {
  const { color, background } = await button.evaluate((element) => {
    const style = getComputedStyle(element);
    return { color: style.color, background: style.backgroundColor };
  });
  const rgb = (value: string) =>
    value
      .match(/\d+(\.\d+)?/g)!
      .slice(0, 3)
      .map(Number);
  const [a, b] = [luminance(rgb(color)), luminance(rgb(background))];
  return (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
}

test("a run waiting at a gate: no serious axe violation, and Approve and Deny are readable", async ({
  page,
  request,
}) => {
  const runId = await startRunViaApi(request, "Gate and wait", {
    steps: [
      { id: "step_1", description: "Write a file", tool: "write_file", args: { path: "gate.txt", content: "x" } },
      { id: "step_2", description: "After it", tool: "echo", args: { value: 1 }, dependsOn: ["step_1"] },
    ],
  });
  const run = new RunViewPage(page);
  await run.open(runId);
  await run.expectStepStatus("step_1", "awaiting_approval");
  const deny = run.pendingItem("step_1").getByRole("button", { name: "Deny" });
  const approve = run.pendingItem("step_1").getByRole("button", { name: "Approve" });
  expect(await contrastOf(deny)).toBeGreaterThanOrEqual(4.5);
  expect(await contrastOf(approve)).toBeGreaterThanOrEqual(4.5);
  expect(await seriousViolations(page)).toEqual([]);
  // Every page has an icon for its tab.
  expect(await page.locator('link[rel="icon"]').count()).toBeGreaterThan(0);
});

test("an agent session's run with a blocker: the session panel passes axe, and its Clear button is readable", async ({
  page,
  request,
}) => {
  const started = await request.post("/api/ops/agent.start", { data: { goal: "Accessible session" } });
  expect(started.ok()).toBe(true);
  await request.post("/api/ops/agent.status", { data: {} });
  await request.post("/api/ops/agent.alert", {
    data: { alert: { id: "lint_red", level: "blocker", message: "Lint fails", task_id: 1 } },
  });
  const sessions = (await (await request.get("/api/trpc/agents.list")).json()).result.data.json as {
    goal: string;
    runId: string;
  }[];
  const run = new RunViewPage(page);
  await run.open(sessions.find((session) => session.goal === "Accessible session")!.runId);
  const clear = page.getByRole("button", { name: "Clear signal lint_red" });
  await expect(clear).toBeVisible();
  expect(await contrastOf(clear)).toBeGreaterThanOrEqual(4.5);
  expect(await seriousViolations(page)).toEqual([]);
});
