import { randomBytes } from "node:crypto";
import type { Browser, BrowserContext } from "@playwright/test";
import { SESSION_COOKIE, sessionValue } from "../server/http/door";

/**
 * The benchmarks start their server with a known access token (every request needs one, loopback
 * included) and present it as a person does: the bearer header from scripts, the session cookie
 * the sign-in link sets from browsers.
 */
export const BENCH_TOKEN = randomBytes(24).toString("base64url");
export const benchAuth = { authorization: `Bearer ${BENCH_TOKEN}` };

export async function signedInContext(browser: Browser, base: string): Promise<BrowserContext> {
  const context = await browser.newContext();
  await context.addCookies([{ name: SESSION_COOKIE, value: sessionValue(BENCH_TOKEN), url: base }]);
  return context;
}
