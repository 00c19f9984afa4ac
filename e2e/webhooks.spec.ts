import http from "node:http";
import type { AddressInfo } from "node:net";
import { axeViolations } from "./pages/accessibility";
import { expect, test } from "@playwright/test";

/**
 * Outgoing webhooks in the browser: a person adds an endpoint (a receiver started here, failing
 * its first request), sees the secret once, sends a test, and watches the delivery log show the
 * failed attempt with its error, the retry, and the success.
 */
const tag = Date.now().toString(36);
let server: http.Server;
let url: string;
const received: { signature: string | undefined; body: Record<string, unknown> }[] = [];

test.beforeAll(async () => {
  server = http.createServer((request, response) => {
    let raw = "";
    request.on("data", (chunk: Buffer) => (raw += chunk.toString("utf8")));
    request.on("end", () => {
      received.push({
        signature: request.headers["x-stepwise-signature"] as string | undefined,
        body: JSON.parse(raw) as Record<string, unknown>,
      });
      // The first request fails: the log must show it, then the retry that succeeds.
      if (received.length === 1) response.writeHead(502).end("receiver warming up");
      else response.writeHead(200).end("ok");
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
});
test.afterAll(async () => {
  await new Promise<void>((resolve) => server.close(() => resolve()));
});

test("configure a webhook with the keyboard, see its secret once and its delivery log", async ({ page }) => {
  await page.goto("/settings");
  await page.getByRole("link", { name: "configure webhooks" }).click();
  await expect(page.getByRole("heading", { name: "Outgoing webhooks" })).toBeVisible();

  // A URL that is not http(s) is refused with a message.
  const form = page.getByRole("form", { name: "Add a webhook" });
  await form.getByLabel("Name").fill(`Team chat ${tag}`);
  await form.getByLabel("URL (http or https)").fill("ftp://example.com/hook");
  await form.getByRole("button", { name: "Add webhook" }).click();
  await expect(form.getByRole("alert")).toContainText("Only http:// and https://");

  await form.getByLabel("URL (http or https)").fill(url);
  await form.getByLabel("Run failed").check();
  await form.getByLabel("URL (http or https)").focus();
  await page.keyboard.press("Enter");

  const secret = page.getByTestId("webhook-secret-value");
  await expect(secret).toHaveText(/^whsec_/);
  const secretValue = await secret.innerText();
  await page.getByRole("button", { name: "I have stored it" }).click();
  await expect(page.getByTestId("webhook-secret")).toHaveCount(0);

  const card = page.getByTestId("webhook").filter({ hasText: `Team chat ${tag}` });
  await expect(card).toContainText("Waiting for you, Run failed");
  await card.getByRole("button", { name: "Send a test" }).click();
  const log = card.getByTestId("delivery-log");
  const delivery = log.getByTestId("delivery").first();
  // The receiver failed the first attempt and accepted the retry.
  await expect(delivery).toHaveAttribute("data-status", "succeeded", { timeout: 60_000 });
  await expect(delivery.getByTestId("attempt")).toHaveCount(2);
  await expect(delivery.getByTestId("attempt").first()).toContainText("HTTP 502");
  await expect(delivery.getByTestId("attempt").first()).toContainText("receiver warming up");
  await expect(delivery.getByTestId("attempt").nth(1)).toContainText("HTTP 200");
  expect(received).toHaveLength(2);
  expect(received[0]!.signature).toMatch(/^sha256=[0-9a-f]{64}$/);
  expect(received[0]!.body).toMatchObject({ event: "webhook.test" });

  // The page with its log open is clean under axe.
  expect(await axeViolations(page)).toEqual([]);

  // Send it again from the log: a third request, the same delivery.
  await delivery.getByRole("button", { name: "Send again" }).click();
  await expect(delivery.getByTestId("attempt")).toHaveCount(3, { timeout: 60_000 });
  expect(received[2]!.body.id).toBe(received[0]!.body.id);

  // The secret is not on the page any more, after a reload either.
  await page.reload();
  await expect(page.getByTestId("webhook").filter({ hasText: `Team chat ${tag}` })).toBeVisible();
  expect(await page.content()).not.toContain(secretValue);
});
