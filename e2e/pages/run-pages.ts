import { expect, type APIRequestContext, type Locator, type Page } from "@playwright/test";
import { trpc } from "./trpc-api";

/**
 * Creates a plan and approves it through the API, so run specs do not depend on the plan editor's
 * UI. Returns the new run's id.
 */
export async function startRunViaApi(request: APIRequestContext, goal: string, plan: unknown): Promise<string> {
  const created = await trpc<{ id: string; version: number }>(request, "plans.createFromJson", {
    goal,
    planJson: JSON.stringify(plan),
  });
  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", {
    planId: created.id,
    version: created.version,
  });
  return runId;
}

/** A run's live view: its header, the pending list, steps and the graph, timeline and event tabs. */
export class RunViewPage {
  constructor(readonly page: Page) {}

  async open(runId: string) {
    await this.page.goto(`/runs/${runId}`);
    await expect(this.run()).toBeVisible();
  }

  step(stepId: string): Locator {
    return this.page.locator(`li.run-step[data-step-id="${stepId}"]`);
  }

  async expectStepStatus(stepId: string, status: string) {
    await expect(this.step(stepId)).toHaveAttribute("data-status", status);
  }

  /**
   * Waits until every listed step shows its status at the same moment: checking them one after the
   * other lets a later check see a state the run has already left on a busy machine.
   */
  async expectStepStatuses(statuses: Record<string, string>) {
    const ids = Object.keys(statuses);
    await expect
      .poll(async () => {
        const seen: Record<string, string | null> = {};
        for (const id of ids) seen[id] = await this.step(id).getAttribute("data-status");
        return seen;
      })
      .toEqual(statuses);
  }

  run(): Locator {
    return this.page.getByRole("region", { name: "Run" });
  }

  async expectRunStatus(status: string) {
    await expect(this.run()).toHaveAttribute("data-run-status", status);
  }

  connection(): Locator {
    return this.page.getByTestId("connection");
  }

  pending(): Locator {
    return this.page.getByTestId("pending");
  }

  count(status: string): Locator {
    return this.page.locator(`[data-testid="run-counts"] [data-status="${status}"]`);
  }

  async showTab(name: "Steps" | "Graph" | "Timeline" | "Events") {
    await this.page.getByRole("tab", { name }).click();
  }

  /** One entry of "Waiting for you": where a person approves, denies or answers. */
  pendingItem(stepId: string): Locator {
    return this.pending().locator(`[data-pending-step="${stepId}"]`);
  }

  async decide(stepId: string, approve: boolean, note?: string) {
    const item = this.pendingItem(stepId);
    if (note) await item.getByLabel("Note (optional)").fill(note);
    await item.getByRole("button", { name: approve ? "Approve" : "Deny" }).click();
  }

  async cancelRun() {
    await this.page.getByRole("button", { name: "Cancel run…" }).click();
    await this.page.getByRole("button", { name: "Yes, cancel the run" }).click();
  }

  eventList(): Locator {
    return this.page.getByTestId("event-list");
  }

  /** Sequence numbers of the rendered events, in the order shown (Events tab). */
  async eventSeqs(): Promise<number[]> {
    const values = await this.eventList()
      .locator("li[data-seq]")
      .evaluateAll((items) => items.map((item) => Number(item.getAttribute("data-seq"))));
    return values;
  }

  /** Loads the events from before the page's snapshot, so the list covers the whole run. */
  async showEarlierEvents() {
    const button = this.page.getByRole("button", { name: /Show the \d+ earlier events/ });
    if (await button.isVisible()) await button.click();
    await expect(this.page.getByText("Loading earlier events…")).toHaveCount(0);
  }
}
