import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test, type Page } from "@playwright/test";
import { RunViewPage } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";

/**
 * The pages a newcomer meets on the first day, as a browser shows them: the decision link's page in
 * the app's look and the reader's own time zone, copy buttons that really copy, an audit log that
 * fits the window, and a webhook card that shows its test's result without a reload.
 */
const tag = Date.now().toString(36);

async function gatedRun(request: Parameters<typeof trpc>[0], goal: string): Promise<string> {
  const plan = await trpc<{ id: string; version: number }>(request, "plans.createFromJson", {
    planJson: JSON.stringify({
      goal,
      steps: [
        { id: "step_1", description: "Write the marker", tool: "shell", args: { command: "echo hi > marker.txt" } },
      ],
    }),
  });
  const { runId } = await trpc<{ runId: string }>(request, "plans.approve", { planId: plan.id, version: plan.version });
  return runId;
}

async function clipboardText(page: Page): Promise<string> {
  return page.evaluate(() => navigator.clipboard.readText());
}

test("the decision link page looks like the app, light or dark, and shows the expiry in the reader's zone", async ({
  browser,
  page,
  request,
}) => {
  const runId = await gatedRun(request, `Link look ${tag}`);
  let link: { url: string; expiresAt: string } | undefined;
  await expect(async () => {
    link = await trpc<{ url: string; expiresAt: string }>(request, "runs.createDecisionLink", {
      runId,
      stepId: "step_1",
    });
  }).toPass({ timeout: 60_000 });

  // The app's own dark background, read from a page of the app.
  await page.emulateMedia({ colorScheme: "dark" });
  await page.goto("/runs");
  const appBackground = await page.evaluate(() => getComputedStyle(document.documentElement).backgroundColor);

  // A phone in another zone, in dark mode, never signed in.
  const phone = await browser.newContext({
    storageState: { cookies: [], origins: [] },
    timezoneId: "Asia/Kolkata",
    locale: "en-GB",
    colorScheme: "dark",
  });
  const linkPage = await phone.newPage();
  await linkPage.goto(link!.url);
  await expect(linkPage.getByRole("heading", { name: "Decide: step_1" })).toBeVisible();
  expect(appBackground).not.toBe("rgba(0, 0, 0, 0)");
  expect(await linkPage.evaluate(() => getComputedStyle(document.documentElement).backgroundColor)).toBe(appBackground);
  expect(
    await linkPage.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue("--primary").trim()),
  ).toBe(await page.evaluate(() => getComputedStyle(document.documentElement).getPropertyValue("--primary").trim()));

  // The expiry: how long is left, and the moment in the phone's zone (not the server's UTC).
  await expect(linkPage.getByTestId("expires-in")).toHaveText(/^in (\d+ h( \d+ min)?|\d+ min)$/);
  const expected = await linkPage.evaluate(
    (iso) => new Date(iso).toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" }),
    link!.expiresAt,
  );
  const time = linkPage.locator("time[data-local-time]");
  await expect(time).toHaveText(expected);
  await expect(time).not.toContainText("UTC");
  await phone.close();
});

test("copy buttons put the decision link and a new person's token on the clipboard, by mouse or keyboard", async ({
  page,
  context,
  request,
}) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  const runId = await gatedRun(request, `Copy ${tag}`);
  const run = new RunViewPage(page);
  await run.open(runId);
  const step = run.pendingItem("step_1");
  await step.getByRole("button", { name: "Make a link to decide elsewhere" }).click();
  // The link is shown whole, not cut off in a narrow field.
  const shown = step.getByTestId("decision-link-url");
  await expect(shown).toHaveText(/^http:\/\/127\.0\.0\.1:\d+\/decide\/\S+$/);
  const url = (await shown.textContent())!;
  const copy = step.getByRole("button", { name: "Copy decision link for step_1" });
  await copy.focus();
  await page.keyboard.press("Enter");
  await expect(step.getByText("Copied.")).toBeVisible();
  expect(await clipboardText(page)).toBe(url);

  await page.goto("/people");
  await expect(page.getByRole("table", { name: "People and agents" })).toBeVisible();
  const add = page.getByRole("form", { name: "Add a person or agent" });
  await add.getByLabel("Name").fill(`cleo-${tag}`);
  await add.getByRole("button", { name: "Add and make a token" }).click();
  const token = (await page.getByTestId("new-token").textContent())!.trim();
  expect(token).toMatch(/^swp_/);
  await page.getByRole("button", { name: `Copy cleo-${tag}’s token` }).click();
  await expect.poll(() => clipboardText(page)).toBe(token);
  await page.getByRole("button", { name: `Copy cleo-${tag}’s sign-in link` }).click();
  await expect.poll(() => clipboardText(page)).toContain(`/sign-in?token=${encodeURIComponent(token)}`);
  // The credentials list has no bullet: its rows are laid out by the page.
  const credentials = page.getByRole("list", { name: `Credentials of cleo-${tag}` });
  await expect(credentials).toHaveCSS("list-style-type", "none");
});

test("the audit log fits a 1280-wide window, with short hashes (full on hover and copy) and the raw JSON on request", async ({
  page,
  context,
  request,
}) => {
  await context.grantPermissions(["clipboard-read", "clipboard-write"]);
  await page.setViewportSize({ width: 1280, height: 800 });
  const runId = await gatedRun(request, `Audit fit ${tag}`);
  await expect(async () => {
    await trpc(request, "runs.decide", {
      runId,
      stepId: "step_1",
      approve: true,
      note: "A long note so the detail column has something to wrap: ".repeat(4),
    });
  }).toPass({ timeout: 60_000 });

  await page.goto("/audit");
  const entry = page.locator(`tr[data-audit-action="step.approved"]`).first();
  await expect(entry).toBeVisible();
  const overflow = await page.evaluate(
    () => document.documentElement.scrollWidth - document.documentElement.clientWidth,
  );
  expect(overflow).toBeLessThanOrEqual(0);

  const hash = entry.getByTestId("audit-hash");
  await expect(hash).toHaveText(/^[0-9a-f]{12}$/);
  const full = (await hash.getAttribute("title"))!;
  expect(full).toMatch(/^[0-9a-f]{64}$/);
  expect(full.startsWith((await hash.textContent())!)).toBe(true);
  await entry.getByRole("button", { name: /^Copy definition hash/ }).click();
  await expect.poll(() => clipboardText(page)).toBe(full);

  // The raw JSON is behind a toggle, reachable by keyboard.
  const raw = entry.locator("details");
  await expect(raw.locator("pre")).toBeHidden();
  await raw.locator("summary").focus();
  await page.keyboard.press("Enter");
  await expect(raw.locator("pre")).toContainText(`"definitionHash": "${full}"`);
});

test("a webhook card shows its test's result without a reload", async ({ page, request }) => {
  // The receiver holds its answer until the card has shown the delivery as pending: the result
  // then arrives only after the page read the list, as it does when the worker is slower than the
  // page (on a quick machine the delivery could settle before the first read and hide the bug).
  const held: http.ServerResponse[] = [];
  let released = false;
  const receiver = http.createServer((incoming, response) => {
    incoming.resume();
    incoming.on("end", () => (released ? response.writeHead(200).end("ok") : held.push(response)));
  });
  await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
  try {
    const name = `Card ${tag}`;
    await trpc(request, "webhooks.create", {
      name,
      url: `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`,
      events: ["run.failed"],
    });
    await page.goto("/settings/webhooks");
    const card = page.getByTestId("webhook").filter({ hasText: name });
    const status = card.getByRole("heading", { name }).locator("xpath=..");
    await expect(card).toBeVisible();
    await card.getByRole("button", { name: "Send a test" }).click();
    await expect(status).toContainText("last delivery pending", { timeout: 60_000 });
    released = true;
    for (const response of held.splice(0)) response.writeHead(200).end("ok");
    // No reload: the card reads again until the delivery settles (a held attempt that timed out
    // is retried, and the receiver now answers at once).
    await expect(status).toContainText("last delivery succeeded", { timeout: 90_000 });
  } finally {
    released = true;
    for (const response of held.splice(0)) response.destroy();
    await new Promise<void>((resolve) => receiver.close(() => resolve()));
  }
});
