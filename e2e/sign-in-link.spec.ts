import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test } from "@playwright/test";
import { E2E_PORT } from "./e2e-env";
import { trpc } from "./pages/trpc-api";

/**
 * Login CSRF: a page on another port of this machine (same site, so the browser sends what it
 * likes there) tries to sign the person's browser in as the attacker's own principal through a
 * sign-in link — by navigating to `/sign-in?token=…`, by loading it in a frame and an image, and
 * by posting the sign-in form. The browser must stay signed in as the person it was.
 */
const base = `http://127.0.0.1:${E2E_PORT}`;

const attackPage = (token: string, how: "navigate" | "embed" | "form") => {
  const link = `${base}/sign-in?token=${encodeURIComponent(token)}`;
  if (how === "navigate") return `<!doctype html><script>location.href = ${JSON.stringify(link)};</script>`;
  if (how === "embed") return `<!doctype html><iframe src="${link}"></iframe><img src="${link}"><p>embedded</p>`;
  return `<!doctype html><form method="post" action="${base}/sign-in"><input name="token" value="${token}"></form>
<script>document.forms[0].submit();</script>`;
};

test("a page on another port cannot sign the browser in as someone else through /sign-in?token=", async ({
  page,
  request,
}) => {
  const mallory = `mallory-${Date.now().toString(36)}`;
  const { token } = await trpc<{ token: string }>(request, "people.add", {
    kind: "person",
    name: mallory,
    role: "viewer",
  });
  await page.goto("/");
  await expect(page.getByTestId("signed-in-as")).toHaveText("user · admin");
  const session = async () =>
    (await page.context().cookies(base)).find((cookie) => cookie.name === "stepwise_session")?.value;
  const before = await session();
  expect(before).toBeTruthy();

  let how: "navigate" | "embed" | "form" = "navigate";
  const attacker = createServer((_req, res) =>
    res.writeHead(200, { "content-type": "text/html" }).end(attackPage(token, how)),
  );
  await new Promise<void>((resolve) => attacker.listen(0, "127.0.0.1", resolve));
  const attackerOrigin = `http://127.0.0.1:${(attacker.address() as AddressInfo).port}`;
  try {
    // Navigating to the link shows whom it would sign in as, and changes nothing until pressed.
    await page.goto(`${attackerOrigin}/`);
    await expect(page.getByRole("button", { name: `Sign in as ${mallory}` })).toBeVisible();
    expect(await session()).toBe(before);

    how = "embed";
    await page.goto(`${attackerOrigin}/`);
    await expect(page.getByText("embedded")).toBeVisible();
    // The frame refuses to render (frame-ancestors 'none'); nothing was signed in either way.
    await page.waitForLoadState("load");
    expect(await session()).toBe(before);

    // The form's POST comes from another origin: the door refuses it.
    how = "form";
    await Promise.all([page.waitForURL(`${base}/sign-in`), page.goto(`${attackerOrigin}/`)]);
    await expect(page.locator("body")).toContainText(/Cross-origin request|Origin not allowed/);
    expect(await session()).toBe(before);
  } finally {
    attacker.closeAllConnections();
    await new Promise((resolve) => attacker.close(resolve));
  }
  await page.goto("/");
  await expect(page.getByTestId("signed-in-as")).toHaveText("user · admin");
});
