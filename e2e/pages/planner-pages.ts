import { expect, type Locator, type Page } from "@playwright/test";

/** The "New task" form: goal, workspace, model, mode, judge. */
export class NewTaskPage {
  constructor(private readonly page: Page) {}

  async open() {
    await this.page.goto("/tasks/new");
    await expect(this.page.getByRole("heading", { name: "New task" })).toBeVisible();
  }

  goal(): Locator {
    return this.page.getByLabel("Goal");
  }

  async plan(goal: string, options: { mode?: "quick" | "deep"; judge?: boolean } = {}): Promise<PlanningSessionPage> {
    await this.goal().fill(goal);
    if (options.mode === "deep") await this.page.getByRole("radio", { name: /Deep/ }).check();
    if (options.judge) await this.page.getByRole("checkbox", { name: /LLM judge/ }).check();
    await this.page.getByRole("button", { name: "Plan it" }).click();
    await expect(this.page).toHaveURL(/\/tasks\/[0-9a-f-]{36}$/);
    return new PlanningSessionPage(this.page);
  }

  configureHelp(): Locator {
    return this.page.getByTestId("configure-help");
  }
}

/** A planning session's live page. */
export class PlanningSessionPage {
  constructor(private readonly page: Page) {}

  session(): Locator {
    return this.page.getByTestId("planning-session");
  }

  progress(): Locator {
    return this.page.getByRole("list", { name: "Planning progress" });
  }

  async expectStatus(status: string) {
    await expect(this.session()).toHaveAttribute("data-session-status", status);
  }

  async answer(question: string | RegExp, answer: string) {
    const form = this.page.getByRole("form", { name: "Question from the planner" });
    await expect(form).toContainText(question);
    await form.getByLabel("Your answer").fill(answer);
    await form.getByRole("button", { name: "Send answer" }).click();
  }

  async cancel() {
    await this.page.getByRole("button", { name: "Cancel planning" }).click();
  }

  async retry(): Promise<PlanningSessionPage> {
    const before = this.page.url();
    await this.page.getByRole("button", { name: "Retry planning" }).click();
    await expect(this.page).not.toHaveURL(before);
    return new PlanningSessionPage(this.page);
  }

  async reviewPlan() {
    await this.page.getByRole("link", { name: "Review the plan" }).click();
    await expect(this.page).toHaveURL(/\/plans\/plan-[0-9a-f]{8}$/);
  }

  failure(): Locator {
    return this.page.getByTestId("planning-failed");
  }

  validationFailure(): Locator {
    return this.page.getByTestId("plan-validation-failed");
  }
}

/** The planner's tools on a plan's review page. */
export class PlanPlannerTools {
  constructor(private readonly page: Page) {}

  async regenerate(feedback: string): Promise<PlanningSessionPage> {
    const form = this.page.getByRole("form", { name: "Regenerate with feedback" });
    await form.getByLabel("Regenerate with feedback").fill(feedback);
    await form.getByRole("button", { name: /Regenerate from version/ }).click();
    await expect(this.page).toHaveURL(/\/tasks\/[0-9a-f-]{36}$/);
    return new PlanningSessionPage(this.page);
  }

  usage(): Locator {
    return this.page.getByTestId("llm-usage");
  }
}

/** Seed 002's `/plan` command box (New task page and a planning session's page). */
export class PlanCommandBox {
  constructor(private readonly page: Page) {}

  form(): Locator {
    return this.page.getByRole("form", { name: "Planning command" });
  }

  result(): Locator {
    return this.form().getByRole("status");
  }

  error(): Locator {
    return this.form().getByRole("alert");
  }

  async run(command: string) {
    await this.form().getByLabel("Planning command").fill(command);
    await this.form().getByRole("button", { name: "Run command" }).click();
  }
}
