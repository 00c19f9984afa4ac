import { expect, type Locator, type Page } from "@playwright/test";
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

/** A plan's review page. */
export class PlanViewPage {
  constructor(private readonly page: Page) {}

  step(stepId: string): Locator {
    return this.page.locator(`li[data-step-id="${stepId}"]`);
  }

  /** Approves the current version and lands on the new run's live view. */
  async approve(): Promise<RunViewPage> {
    await this.page.getByRole("button", { name: /Approve and run/ }).click();
    await expect(this.page).toHaveURL(/\/runs\/[0-9a-f-]{36}$/);
    return new RunViewPage(this.page);
  }
}
