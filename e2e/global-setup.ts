import { request, type FullConfig } from "@playwright/test";
import { E2E_DATA_DIR, E2E_PORT, E2E_STATE_FILE, readAccessToken } from "./e2e-env";

/**
 * Signs the browser tests in the way a person does: the server made an access token on its first
 * start (loopback included); its sign-in link shows whom it signs in as, and the page's same-origin
 * POST sets the session cookie. Runs after Playwright
 * started the server; every spec starts from the saved state (playwright.config.ts).
 */
export default async function globalSetup(_config: FullConfig): Promise<void> {
  const base = `http://127.0.0.1:${E2E_PORT}`;
  const token = await readAccessToken(E2E_DATA_DIR);
  const context = await request.newContext({ baseURL: base });
  try {
    const anonymous = await context.get("/api/trpc/plans.list");
    if (anonymous.status() !== 401) throw new Error(`without signing in the server answered ${anonymous.status()}`);
    const link = await context.get(`/sign-in?token=${encodeURIComponent(token)}`, { maxRedirects: 0 });
    if (!link.ok() || !(await link.text()).includes("Sign in as user")) {
      throw new Error(`the sign-in link answered ${link.status()}`);
    }
    // What the page's "Sign in as user" button sends.
    const signIn = await context.post("/sign-in", { form: { token }, headers: { origin: base }, maxRedirects: 0 });
    if (signIn.status() !== 303) throw new Error(`the sign-in form answered ${signIn.status()}`);
    const signedIn = await context.get("/api/trpc/plans.list");
    if (!signedIn.ok()) throw new Error(`after signing in the server answered ${signedIn.status()}`);
    await context.storageState({ path: E2E_STATE_FILE });
  } finally {
    await context.dispose();
  }
}
