import { expect, type Locator, type Page } from "@playwright/test";

/** The Workspaces page: register, rename and remove directories. */
export class WorkspacesPage {
  constructor(readonly page: Page) {}

  async open() {
    await this.page.goto("/workspaces");
    await expect(this.page.getByRole("heading", { level: 1, name: "Workspaces" })).toBeVisible();
  }

  row(name: string): Locator {
    return this.page.getByRole("table", { name: "Registered workspaces" }).getByRole("row", { name });
  }

  async register(directory: string) {
    const form = this.page.getByRole("form", { name: "Register a workspace" });
    await form.getByLabel("Absolute path").fill(directory);
    await form.getByRole("button", { name: "Register" }).click();
  }

  async rename(from: string, to: string) {
    await this.row(from).getByRole("button", { name: "Rename" }).click();
    const form = this.page.getByRole("form", { name: `Rename ${from}` });
    await form.getByLabel("New name").fill(to);
    await form.getByRole("button", { name: "Save" }).click();
  }

  async remove(name: string) {
    await this.row(name).getByRole("button", { name: "Remove…" }).click();
    await this.page
      .getByRole("group", { name: `Confirm removing ${name}` })
      .getByRole("button", { name: "Remove", exact: true })
      .click();
  }
}

/** The audit log page and its filters. */
export class AuditLogPage {
  constructor(readonly page: Page) {}

  entries(): Locator {
    return this.page.getByRole("table", { name: "Audit entries" }).locator("tbody tr");
  }

  entry(action: string): Locator {
    return this.page.locator(`tr[data-audit-action="${action}"]`);
  }

  async filterByPerson(person: string) {
    const form = this.page.getByRole("search", { name: "Filter the audit log" });
    await form.getByLabel("Person").fill(person);
    await form.getByRole("button", { name: "Filter" }).click();
  }
}
