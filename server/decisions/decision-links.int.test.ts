import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { adoptPlanVersionIntoRun } from "../engine/engine";
import type { Identity } from "../identity";
import { decisionLinkCreate } from "../operations/decision-links";
import { invokeOperation } from "../operations/operation";
import { planApprove, planCreate } from "../operations/plans";
import { runGet } from "../operations/runs";
import { addPrincipal, revokeCredential, setRole } from "../people/principals";
import { getPlan } from "../plans/service";
import { savePlanVersion } from "../plans/versions";
import { withCaller } from "../caller-context";

/** What the admin does on the People page, under the admin's name (audit verify checks who). */
const asAdmin = <T>(work: () => T): T => withCaller({ kind: "person", name: "user" }, work);

/**
 * Decision links through the real door: the holder of a link, without signing in, sees exactly
 * what would run (GET changes nothing) and makes its one decision, recorded as the person who made
 * the link. Used, expired, altered links and links to a step whose definition changed are refused,
 * and decide nothing.
 */
const ACCESS_TOKEN = "person-access-token";
const AGENT_TOKEN = "agent-token-for-links";
/** alice, an approver with a credential of her own (added in `waitingRun`), makes the links. */
let PERSON: Identity = { kind: "person", name: "alice" };
let alice: { principalId: string; credentialId: string };
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
let dataDir: string;
const previousDataDir = process.env.STEPWISE_DATA_DIR;

beforeAll(async () => {
  // The link key lives in the data folder; keep the test's out of the checkout.
  dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-links-"));
  process.env.STEPWISE_DATA_DIR = dataDir;
});
afterAll(async () => {
  if (previousDataDir === undefined) delete process.env.STEPWISE_DATA_DIR;
  else process.env.STEPWISE_DATA_DIR = previousDataDir;
  await fs.rm(dataDir, { recursive: true, force: true });
});
afterEach(async () => {
  await api?.close();
  await harness?.close();
  api = undefined;
  harness = undefined;
});

const gatedWrite = {
  id: "write",
  description: "write a file",
  tool: "shell",
  args: { command: "echo from-the-link > linked.txt" },
};

async function waitingRun(options: { approvalTimeoutSeconds?: number } = {}) {
  harness = await startHarness({ worker: false });
  api = await startApiServer(harness.app, { agentToken: AGENT_TOKEN, accessToken: ACCESS_TOKEN });
  alice = await asAdmin(() =>
    addPrincipal(harness!.app.db.pool, {
      kind: "person",
      name: "alice",
      role: "approver",
      createdBy: "user",
    }),
  );
  PERSON = { kind: "person", name: "alice", role: "approver", tokenId: alice.credentialId };
  const plan = await invokeOperation(
    planCreate,
    { app: harness.app, identity: PERSON },
    {
      draft: { goal: "links", steps: [gatedWrite] },
    },
  );
  const { runId } = await invokeOperation(
    planApprove,
    { app: harness.app, identity: PERSON },
    {
      planId: plan.id,
      version: plan.version,
      ...(options.approvalTimeoutSeconds && {
        approvalTimeoutSeconds: options.approvalTimeoutSeconds,
        approvalWarningSeconds: 0,
      }),
    },
  );
  await expect.poll(async () => (await stepState(runId)).status, { timeout: 20_000 }).toBe("awaiting_approval");
  return { planId: plan.id, runId };
}

async function stepState(runId: string) {
  const rows = await harness!.app.db.pool.query<{ status: string; waiting: { expiresAt?: string } | null }>(
    "select status, waiting from run_steps where run_id = $1 and step_id = 'write'",
    [runId],
  );
  return rows.rows[0]!;
}

async function makeLink(runId: string, extra: Record<string, unknown> = {}) {
  return invokeOperation(
    decisionLinkCreate,
    { app: harness!.app, identity: PERSON },
    {
      runId,
      stepId: "write",
      ...extra,
    },
  );
}

/** What a phone that never signed in sends: no credential, a page's headers. */
function open(url: string) {
  return fetch(new URL(url, api!.url), { headers: { accept: "text/html" }, redirect: "manual" });
}
function press(url: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return fetch(new URL(url, api!.url), {
    method: "POST",
    headers: { "content-type": "application/json", origin: api!.url, "sec-fetch-site": "same-origin", ...headers },
    body: JSON.stringify(body),
    redirect: "manual",
  });
}

async function decisions(runId: string) {
  return (
    await harness!.app.db.pool.query("select actor, decision, comment from approvals where run_id = $1 order by id", [
      runId,
    ])
  ).rows;
}

describe("decision links", () => {
  it("GET shows exactly what would run and changes nothing; POST decides once, as the link's maker, audited via link", async () => {
    const { runId } = await waitingRun();
    const link = await makeLink(runId);
    expect(link.url).toBe(`/decide/${link.token}`);
    // The signing key is the server's own, readable by its user only; the database has the token's hash only.
    expect((await fs.stat(path.join(dataDir, "decision-link.key"))).mode & 0o777).toBe(0o600);
    const stored = await harness!.app.db.pool.query<{ token_hash: string }>("select token_hash from decision_links");
    expect(stored.rows[0]!.token_hash).not.toContain(link.token.split(".")[1]!);

    for (let i = 0; i < 2; i++) {
      const page = await open(link.url);
      expect(page.status).toBe(200);
      expect(page.headers.get("cache-control")).toBe("no-store");
      const html = await page.text();
      expect(html).toContain("shell");
      expect(html).toContain("echo from-the-link &gt; linked.txt");
      expect(html).toMatch(/Risk \(computed\)<\/dt><dd class="risk-(low|medium|high)">/);
      expect(html).toContain('data-decision="approve"');
      expect(html).toContain('data-decision="deny"');
    }
    // Opening the link decided nothing and used nothing.
    expect((await stepState(runId)).status).toBe("awaiting_approval");
    expect(await decisions(runId)).toEqual([]);
    const unused = await harness!.app.db.pool.query("select used_at from decision_links");
    expect(unused.rows).toEqual([{ used_at: null }]);

    const decided = await press(link.url, { decision: "approve", note: " Looks right. " });
    expect(decided.status).toBe(200);
    expect(await decided.json()).toMatchObject({ runId, stepId: "write", decision: "approve", decidedAs: "alice" });
    expect(await decisions(runId)).toEqual([{ actor: "alice", decision: "approved", comment: "Looks right." }]);
    // Stored as the person who made the link — kind person, not the system's — marked "via link".
    const kinds = await harness!.app.db.pool.query("select actor_kind from approvals where run_id = $1", [runId]);
    expect(kinds.rows).toEqual([{ actor_kind: "person" }]);
    const audit = await harness!.app.db.pool.query<{
      actor: string;
      actor_kind: string;
      detail: Record<string, unknown>;
    }>("select actor, actor_kind, detail from audit_entries where run_id = $1 and action = 'step.approved'", [runId]);
    expect(audit.rows).toEqual([
      {
        actor: "alice",
        actor_kind: "person",
        detail: expect.objectContaining({ via: "link", note: "Looks right.", definitionHash: link.definitionHash }),
      },
    ]);
    expect((await stepState(runId)).status).not.toBe("awaiting_approval");

    // Used: refused on both doors of the link, and nothing more is recorded.
    const again = await press(link.url, { decision: "deny" });
    expect(again.status).toBe(412);
    expect((await again.json()).detail).toContain("already used");
    const reopened = await open(link.url);
    expect(reopened.status).toBe(412);
    expect(await reopened.text()).toContain("already used");
    expect(await decisions(runId)).toHaveLength(1);
  });

  it("is judged at use: a maker demoted below approver, or whose credential was revoked, decides nothing through it", async () => {
    const { runId } = await waitingRun();
    const pool = harness!.app.db.pool;
    const demoted = await makeLink(runId);
    const revoked = await makeLink(runId);
    await asAdmin(() => setRole(pool, alice.principalId, "reviewer", "user"));
    for (const decision of ["approve", "deny"]) {
      const refused = await press(demoted.url, { decision });
      expect(refused.status).toBe(403);
      expect((await refused.json()).detail).toContain("may no longer make this decision");
    }
    const page = await open(demoted.url);
    expect(page.status).toBe(403);
    expect(await page.text()).toContain("may no longer make this decision");
    expect(await decisions(runId)).toEqual([]);
    // Her role back, but the credential she made the links with revoked: both links are dead.
    await asAdmin(() => setRole(pool, alice.principalId, "approver", "user"));
    await asAdmin(() => revokeCredential(pool, alice.credentialId, "user"));
    const refused = await press(revoked.url, { decision: "approve" });
    expect(refused.status).toBe(403);
    expect(await decisions(runId)).toEqual([]);
    expect((await stepState(runId)).status).toBe("awaiting_approval");
    expect((await press(demoted.url, { decision: "deny" })).status).toBe(403);
  });

  it("two presses at once decide once", async () => {
    const { runId } = await waitingRun();
    const link = await makeLink(runId);
    const answers = await Promise.all([
      press(link.url, { decision: "approve" }),
      press(link.url, { decision: "approve" }),
      press(link.url, { decision: "deny" }),
    ]);
    expect(answers.map((answer) => answer.status).sort()).toEqual([200, 412, 412]);
    expect(await decisions(runId)).toHaveLength(1);
  });

  it("an altered token is refused and decides nothing", async () => {
    const { runId } = await waitingRun();
    const link = await makeLink(runId);
    const other = await makeLink(runId, { decisions: ["deny"] });
    const [id, mac] = link.token.split(".");
    const flipped = `${mac![0] === "A" ? "B" : "A"}${mac!.slice(1)}`;
    const forgeries = [
      `/decide/${id}.${flipped}`,
      // One link's id with another's signature.
      `/decide/${other.token.split(".")[0]}.${mac}`,
    ];
    for (const url of forgeries) {
      const page = await open(url);
      expect(page.status).toBe(403);
      expect(await page.text()).toContain("not valid");
      const pressed = await press(url, { decision: "approve" });
      expect(pressed.status).toBe(403);
    }
    // A link allows only the decisions it was made for.
    const denyOnly = await press(other.url, { decision: "approve" });
    expect(denyOnly.status).toBe(403);
    expect(await decisions(runId)).toEqual([]);
    expect((await stepState(runId)).status).toBe("awaiting_approval");
    // The genuine link still works.
    expect((await press(link.url, { decision: "deny" })).status).toBe(200);
    expect(await decisions(runId)).toEqual([{ actor: "alice", decision: "denied", comment: null }]);
  });

  it("never outlives the step's approval expiry, and an expired link is refused", async () => {
    const { runId } = await waitingRun({ approvalTimeoutSeconds: 2 });
    const link = await makeLink(runId, { expiresInSeconds: 24 * 3600 });
    const stepExpiry = (await stepState(runId)).waiting!.expiresAt!;
    expect(Date.parse(link.expiresAt)).toBeLessThanOrEqual(Date.parse(stepExpiry));
    await expect.poll(async () => (await open(link.url)).status, { timeout: 20_000, interval: 250 }).toBe(412);
    expect(await (await open(link.url)).text()).toContain("expired");
    const pressed = await press(link.url, { decision: "approve" });
    expect(pressed.status).toBe(412);
    expect((await pressed.json()).detail).toContain("expired");
    expect(await decisions(runId)).toEqual([]);
  });

  it("a step whose definition changed after the link was made refuses the link, for approve and deny", async () => {
    const { planId, runId } = await waitingRun();
    const link = await makeLink(runId);
    const base = await getPlan(harness!.app.db.prisma, planId, 1);
    const edited = await savePlanVersion(harness!.app.db.prisma, harness!.app.tools, {
      planId,
      baseVersion: 1,
      draft: { ...base, steps: base.steps.map((step) => ({ ...step, args: { command: "echo other > other.txt" } })) },
      source: "agent",
      author: "agent",
      changeNote: "another command",
    });
    await adoptPlanVersionIntoRun(harness!.app.engine, { runId, version: edited.version, actor: "agent" });
    expect((await stepState(runId)).status).toBe("awaiting_approval");
    const page = await open(link.url);
    expect(page.status).toBe(412);
    expect(await page.text()).toContain("changed after this link was made");
    for (const decision of ["approve", "deny"]) {
      const pressed = await press(link.url, { decision });
      expect(pressed.status).toBe(412);
      expect((await pressed.json()).detail).toContain("changed");
    }
    expect(await decisions(runId)).toEqual([]);
    expect((await invokeOperation(runGet, { app: harness!.app, identity: PERSON }, { runId })).steps[0]).toMatchObject({
      status: "awaiting_approval",
    });
  });

  it("the door lets only the exact link path through without a session; agents neither make nor use links", async () => {
    const { runId } = await waitingRun();
    const link = await makeLink(runId);
    // Anything else still needs the person's credential.
    expect((await open("/decide/not-a-token")).status).toBe(303);
    expect((await open(`${link.url}/x`)).status).toBe(303);
    expect((await press("/api/ops/run.decide", { runId, stepId: "write", approve: true })).status).toBe(401);
    // A page elsewhere cannot press the link for its holder.
    const crossSite = await press(link.url, { decision: "approve" }, { origin: "http://evil.example" });
    expect(crossSite.status).toBe(403);
    // The agent token opens no link, and an agent cannot make one.
    const agentHeaders = { authorization: `Bearer ${AGENT_TOKEN}` };
    expect((await press(link.url, { decision: "approve" }, agentHeaders)).status).toBe(403);
    const agentMakes = await press("/api/ops/decision_link.create", { runId, stepId: "write" }, agentHeaders);
    expect(agentMakes.status).toBe(403);
    expect(await decisions(runId)).toEqual([]);
    // A step not waiting for a decision gets no link.
    await press(link.url, { decision: "approve" });
    await expect(makeLink(runId)).rejects.toMatchObject({ code: "invalid_state" });
  });
});
