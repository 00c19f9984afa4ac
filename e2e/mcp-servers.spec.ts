import { expect, test } from "@playwright/test";
import { FIXTURE_TOKEN, startHttpMcpFixture } from "../tests/mcp-fixture";

/**
 * MCP servers on the settings page: an admin (the signed-in access token's holder) adds a
 * Streamable HTTP server with a bearer token, sees its tools and which of them need approval, never
 * sees the token again, sees the server shown down once it stops answering, and removes it.
 */
const tag = Date.now().toString(36);
let fixture: Awaited<ReturnType<typeof startHttpMcpFixture>>;

test.beforeAll(async () => {
  fixture = await startHttpMcpFixture();
});
test.afterAll(async () => {
  await fixture.close();
});

test("add an HTTP MCP server, see its tools and status, and remove it", async ({ page }) => {
  const name = `web-${tag}`;
  await page.goto("/settings");
  const section = page.getByRole("region", { name: "MCP servers" });
  await section.getByRole("button", { name: "Add an MCP server" }).click();
  const form = section.getByRole("form", { name: "Add an MCP server" });
  await form.getByLabel("Server name").fill(name);
  await form.getByLabel("Transport").selectOption("http");
  await form.getByLabel("URL", { exact: true }).fill(fixture.url);
  await form.getByLabel("Headers").fill(`Authorization: ${FIXTURE_TOKEN}`);
  await form.getByRole("button", { name: "Add server" }).click();

  const card = section.getByTestId("mcp-server").filter({ hasText: name });
  await expect(card).toHaveAttribute("data-status", "ok", { timeout: 30_000 });
  const tools = card.getByRole("list", { name: `Tools of ${name}` });
  await expect(tools.getByRole("listitem").filter({ hasText: `mcp__${name}__lookup` })).toContainText(
    "runs without approval",
  );
  await expect(tools.getByRole("listitem").filter({ hasText: `mcp__${name}__publish` })).toContainText(
    "needs approval",
  );
  await expect(card).toContainText("headers: Authorization");
  await expect(page.locator("body")).not.toContainText("fixture-secret-token");

  // The server stops answering: a refresh shows it down, with why.
  await fixture.close();
  await card.getByRole("button", { name: "Refresh" }).click();
  await expect(card).toHaveAttribute("data-status", "down", { timeout: 30_000 });
  await expect(card).toContainText(`MCP server ${name} is not reachable`);

  await card.getByRole("button", { name: "Remove" }).click();
  await expect(card).toHaveCount(0);
});
