import { expect, type APIRequestContext, type Locator, type Page } from "@playwright/test";
import { RunViewPage } from "./run-pages";

/** The "New plan" form. */
export class NewPlanPage {
  constructor(private readonly page: Page) {}

  async open() {
    await this.page.goto("/plans/new");
  }

  async create(goal: string, plan: unknown) {
    await this.page.getByLabel("Goal").fill(goal);
    await this.page.getByLabel(/Plan as JSON/).fill(typeof plan === "string" ? plan : JSON.stringify(plan, null, 2));
    await this.page.getByRole("button", { name: "Create plan" }).click();
  }

  stepIssues(stepId: string): Locator {
    return this.page.locator(`[data-step-id="${stepId}"] [data-testid="step-issue"]`);
  }
}

/** Creates a plan through the API (superjson envelope, as the browser client sends it); returns its id. */
export async function createPlanViaApi(request: APIRequestContext, plan: unknown): Promise<string> {
  const response = await request.post("/api/trpc/plans.createFromJson", {
    data: { json: { planJson: JSON.stringify(plan) } },
  });
  const body = await response.json();
  if (!response.ok()) throw new Error(`plans.createFromJson failed: ${JSON.stringify(body)}`);
  return body.result.data.json.id as string;
}

/** A plan's review page. */
export class PlanViewPage {
  constructor(private readonly page: Page) {}

  async open(planId: string) {
    await this.page.goto(`/plans/${planId}`);
    await expect(this.page.getByTestId("plan-version")).toBeVisible();
  }

  step(stepId: string): Locator {
    return this.page.locator(`li[data-step-id="${stepId}"]`);
  }

  /** Step ids in the order the list shows them. */
  async order(): Promise<string[]> {
    return this.page
      .locator("ol[aria-label='Steps'] > li[data-step-id]")
      .evaluateAll((items) => items.map((item) => item.getAttribute("data-step-id") ?? ""));
  }

  async expectVersion(version: number) {
    await expect(this.page.getByTestId("plan-version")).toHaveText(`version ${version}`);
  }

  notice(): Locator {
    return this.page.getByTestId("plan-notice");
  }

  /** Opens the inline editor of a step and returns it. */
  async edit(stepId: string): Promise<Locator> {
    await this.page.getByRole("button", { name: `Edit ${stepId}`, exact: true }).click();
    const editor = this.editor(stepId);
    await expect(editor).toBeVisible();
    return editor;
  }

  editor(stepId: string): Locator {
    return this.page.getByRole("form", { name: `Edit ${stepId}` });
  }

  /** An argument field of the generated form, by argument name. */
  arg(editor: Locator, name: string): Locator {
    return editor.locator(`[data-arg="${name}"]`);
  }

  dragHandle(stepId: string): Locator {
    return this.page.getByRole("button", { name: `Move ${stepId}`, exact: true });
  }

  /** Moves a step with the keyboard: Space lifts, arrows move, Space drops. */
  async moveWithKeyboard(stepId: string, steps: number) {
    const handle = this.dragHandle(stepId);
    const start = (await this.order()).indexOf(stepId) + 1;
    const announced = this.page.locator("[id^='DndLiveRegion']");
    await handle.focus();
    await this.page.keyboard.press("Space");
    // Each key press is announced once dnd-kit has measured and moved: wait for that, not a time.
    await expect(announced).toContainText(`Picked up ${stepId} at position ${start}`);
    // dnd-kit's keyboard sensor starts listening for arrows in a setTimeout after pick-up, and
    // Chromium runs input before timers: a timer of ours, queued after its one, fires after it.
    await this.page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
    const key = steps < 0 ? "ArrowUp" : "ArrowDown";
    for (let i = 1; i <= Math.abs(steps); i++) {
      await this.page.keyboard.press(key);
      await expect(announced).toContainText(`${stepId} is over position ${start + Math.sign(steps) * i}`);
    }
    await this.page.keyboard.press("Space");
  }

  /** Drags a step by its handle with the mouse so that its card lands on another step's card. */
  async dragOnto(stepId: string, targetId: string) {
    // Cards animate back after a refused drop; measure only once they are at rest.
    await expect
      .poll(async () => {
        const before = JSON.stringify(await this.step(stepId).boundingBox());
        await this.page.waitForTimeout(100);
        return before === JSON.stringify(await this.step(stepId).boundingBox());
      })
      .toBe(true);
    const handle = await this.dragHandle(stepId).boundingBox();
    const card = await this.step(stepId).boundingBox();
    const target = await this.step(targetId).boundingBox();
    if (!handle || !card || !target) throw new Error("Step not visible");
    const x = handle.x + handle.width / 2;
    const y = handle.y + handle.height / 2;
    const order = await this.order();
    const over = `${stepId} is over position ${order.indexOf(targetId) + 1} of ${order.length}.`;
    // Move the dragged card's centre onto the target card's centre (the list uses closest-centre collision).
    const dy = target.y + target.height / 2 - (card.y + card.height / 2);
    await this.page.mouse.move(x, y);
    await this.page.mouse.down();
    await this.page.mouse.move(x, y + Math.sign(dy) * 10, { steps: 3 });
    await this.page.mouse.move(x, y + dy, { steps: 15 });
    // Drop only once the list says the card is over its target. On a busy machine the other cards
    // were still sliding aside after the last move, so the drop went by their old places; a pixel's
    // nudge makes the list measure again.
    let nudge = 1;
    await expect
      .poll(async () => {
        nudge = -nudge;
        await this.page.mouse.move(x, y + dy + nudge);
        return (await this.page.locator("[id^='DndLiveRegion']").textContent()) ?? "";
      })
      .toContain(over);
    await this.page.mouse.up();
  }

  history(): Locator {
    return this.page.getByRole("region", { name: /^Changes from/ });
  }

  /** Approves the current version and lands on the new run's live view. */
  async approve(): Promise<RunViewPage> {
    await this.page.getByRole("button", { name: /Approve and run/ }).click();
    await expect(this.page).toHaveURL(/\/runs\/[0-9a-f-]{36}$/);
    return new RunViewPage(this.page);
  }
}
