import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { addPrincipal } from "../people/principals";
import { withCaller } from "../caller-context";

/** What the admin does on the People page, under the admin's name (audit verify checks who). */
const asAdmin = <T>(work: () => T): T => withCaller({ kind: "person", name: "user" }, work);

/**
 * Signing in through a link (`/sign-in?token=`) through the real door: the GET only shows whom
 * the link signs in as, with a button that POSTs the token; the POST signs in only from this
 * server's own origin. So a page elsewhere — another port is the same site — cannot sign the
 * person's browser in as the attacker's principal (login CSRF).
 */
const ACCESS_TOKEN = "sign-in-access-token";
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;

afterEach(async () => {
  await api?.close();
  await harness?.close();
  api = harness = undefined;
});

async function start() {
  harness = await startHarness({ worker: false });
  api = await startApiServer(harness.app, { agentToken: "sign-in-agent-token", accessToken: ACCESS_TOKEN });
  const mallory = await asAdmin(() =>
    addPrincipal(harness!.app.db.pool, {
      kind: "person",
      name: "mallory",
      role: "viewer",
      createdBy: "user",
    }),
  );
  return { url: api.url, token: mallory.token };
}

const form = (token: string) => new URLSearchParams({ token }).toString();

describe("sign-in links", () => {
  it("GET shows whom the link signs in as and sets no cookie, whoever sent the browser there", async () => {
    const { url, token } = await start();
    for (const site of ["same-site", "none"]) {
      const page = await fetch(`${url}/sign-in?token=${encodeURIComponent(token)}`, {
        headers: { accept: "text/html", "sec-fetch-site": site },
        redirect: "manual",
      });
      expect(page.status).toBe(200);
      expect(page.headers.get("set-cookie")).toBeNull();
      expect(page.headers.get("x-frame-options")).toBe("DENY");
      expect(page.headers.get("referrer-policy")).toBe("same-origin");
      const html = await page.text();
      expect(html).toContain("Sign in as mallory</button>");
      expect(html).toContain('<form method="post" action="/sign-in">');
    }
    const own = await fetch(`${url}/sign-in?token=${ACCESS_TOKEN}`, { redirect: "manual" });
    expect(await own.text()).toContain("Sign in as user</button>");
    const wrong = await fetch(`${url}/sign-in?token=not-a-token`, { redirect: "manual" });
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get("set-cookie")).toBeNull();
  });

  it("the POST signs in from this origin only: another port's Origin or Sec-Fetch-Site is refused", async () => {
    const { url, token } = await start();
    const post = (headers: Record<string, string>) =>
      fetch(`${url}/sign-in`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
        body: form(token),
        redirect: "manual",
      });
    const otherPort = url.replace(/:\d+$/, ":1");
    const attempts: Record<string, string>[] = [
      { origin: otherPort, "sec-fetch-site": "same-site" },
      { origin: otherPort },
      { "sec-fetch-site": "same-site" },
      { "sec-fetch-site": "cross-site" },
    ];
    for (const headers of attempts) {
      const refused = await post(headers);
      expect(refused.status, JSON.stringify(headers)).toBe(403);
      expect(refused.headers.get("set-cookie")).toBeNull();
    }
    const signedIn = await post({ origin: url, "sec-fetch-site": "same-origin" });
    expect(signedIn.status).toBe(303);
    const cookie = signedIn.headers.get("set-cookie")!;
    expect(cookie).toMatch(/^stepwise_session=/);
    // The cookie signs in as mallory.
    const me = await fetch(`${url}/api/ops/people.me`, {
      method: "POST",
      headers: { "content-type": "application/json", cookie: cookie.split(";")[0]! },
      body: "{}",
    });
    expect(me.status).toBe(200);
    expect(await me.json()).toMatchObject({ name: "mallory", role: "viewer" });
  });
});
