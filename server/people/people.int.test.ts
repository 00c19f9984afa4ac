import { afterEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startApiServer } from "../../tests/door-http-server";
import { stepApprovedUnderPolicy } from "../engine/approval-view";
import { decideApproval } from "../engine/engine";
import { withCaller } from "../caller-context";
import { sessionValue } from "../http/door";
import type { Identity } from "../identity";
import { invokeOperation, type Operation } from "../operations/operation";
import { peopleAdd, peopleList, peopleRevokeCredential, peopleSetRole, workspaceSetPolicy } from "../operations/people";
import { planComment } from "../operations/plan-comments";
import { planApprove, planCreate } from "../operations/plans";
import { runApproval, runDecide, runGet } from "../operations/runs";
import { workspaceForPlan } from "../operations/workspaces";

/**
 * Named people with roles, and a workspace's approver policy, enforced in the operations layer and
 * the engine's decision: two distinct approvals for a high-risk step, the same person twice not
 * counting, the author refused (a person's version and an agent's), each role held to its
 * operations, and a revoked credential refused at the door on the next request.
 */
let harness: Harness | undefined;
let api: Awaited<ReturnType<typeof startApiServer>> | undefined;
afterEach(async () => {
  await api?.close();
  api = undefined;
  await harness?.close();
  harness = undefined;
});

const OWNER: Identity = { kind: "person", name: "user" };
const ALICE: Identity = { kind: "person", name: "alice", role: "approver" };
const BOB: Identity = { kind: "person", name: "bob", role: "approver" };

function as<I extends z.ZodType, O extends z.ZodType>(identity: Identity, operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity }, input);
}

/** `rm -rf build` is high risk by its computed assessment, whatever the author says. */
const destructive = { id: "clean", description: "clean the build", tool: "shell", args: { command: "rm -rf build" } };

async function runWaitingForApproval(
  author: Identity,
  policy: { approvals: { low: number; medium: number; high: number }; authorMayApprove: boolean },
) {
  const plan = await as(author, planCreate, { draft: { goal: "clean", steps: [destructive] } });
  // The workspace the run will act in (the default one, for a plan made without one).
  const { id: workspaceId } = await as(OWNER, workspaceForPlan, { planId: plan.id });
  expect(workspaceId).toBeTruthy();
  await as(OWNER, workspaceSetPolicy, { workspaceId, policy });
  const audited = await harness!.app.db.pool.query<{ actor: string; detail: { after: unknown } }>(
    "select actor, detail from audit_entries where plan_id = $1 and action = 'workspace.approver_policy_set'",
    [`workspace:${workspaceId}`],
  );
  expect(audited.rows.at(-1)).toMatchObject({ actor: "user", detail: { after: policy } });
  return { plan, workspaceId };
}

async function stepStatus(identity: Identity, runId: string): Promise<string> {
  const run = (await as(identity, runGet, { runId })) as { steps: { status: string }[] };
  return run.steps[0]!.status;
}

async function startAndWait(approver: Identity, plan: { id: string; version: number }) {
  const { runId } = await as(approver, planApprove, { planId: plan.id, version: plan.version });
  await expect.poll(async () => await stepStatus(approver, runId), { timeout: 60_000 }).toBe("awaiting_approval");
  return runId;
}

/** The policy rule as code outside the engine asks it (an agent task's verifiers). */
async function approvedUnderPolicy(runId: string, stepId: string): Promise<boolean> {
  const run = await harness!.app.db.pool.query<{ plan_id: string; plan_version: number; workspace_root: string }>(
    "select plan_id, plan_version, workspace_root from runs where id = $1",
    [runId],
  );
  const { plan_id, plan_version, workspace_root } = run.rows[0]!;
  return stepApprovedUnderPolicy(
    harness!.app.db.pool,
    harness!.app.tools,
    { id: runId, planId: plan_id, planVersion: plan_version, workspaceRoot: workspace_root },
    stepId,
  );
}

async function stepApprovals(runId: string) {
  const rows = await harness!.app.db.pool.query<{ actor: string; detail: Record<string, unknown> }>(
    "select actor, detail from audit_entries where run_id = $1 and action = 'step.approved' order by id",
    [runId],
  );
  return rows.rows;
}

describe("approver policy", () => {
  it("two approvals for high risk: the first is recorded and the step waits, the same person twice does not count, a second person releases it", async () => {
    harness = await startHarness();
    const { plan } = await runWaitingForApproval(OWNER, {
      approvals: { low: 1, medium: 1, high: 2 },
      authorMayApprove: true,
    });
    const runId = await startAndWait(OWNER, plan);

    await as(ALICE, runDecide, { runId, stepId: "clean", approve: true });
    const waiting = await as(ALICE, runApproval, { runId, stepId: "clean" });
    expect(waiting.status).toBe("awaiting_approval");
    expect(waiting.approval?.approvals).toEqual({ required: 2, given: ["alice"], policy: "2 approvals for high risk" });
    expect(await approvedUnderPolicy(runId, "clean")).toBe(false);

    await expect(as(ALICE, runDecide, { runId, stepId: "clean", approve: true })).rejects.toMatchObject({
      code: "invalid_state",
      message: expect.stringContaining("alice already approved clean; it has 1 of 2 approvals"),
    });
    expect(await stepStatus(ALICE, runId)).toBe("awaiting_approval");

    await as(BOB, runDecide, { runId, stepId: "clean", approve: true });
    expect(await approvedUnderPolicy(runId, "clean")).toBe(true);
    await expect.poll(async () => await stepStatus(BOB, runId), { timeout: 60_000 }).toBe("completed");

    const audit = await stepApprovals(runId);
    expect(audit.map((entry) => entry.actor)).toEqual(["alice", "bob"]);
    expect(audit[0]!.detail).toMatchObject({
      policy: "2 approvals for high risk",
      approvals: ["alice"],
      required: 2,
      released: false,
    });
    expect(audit[1]!.detail).toMatchObject({
      policy: "2 approvals for high risk",
      approvals: ["alice", "bob"],
      required: 2,
      released: true,
    });
  });

  it("refuses the author's approval of a person's plan version, at the plan and at the gate", async () => {
    harness = await startHarness({ worker: false });
    const { plan } = await runWaitingForApproval(ALICE, {
      approvals: { low: 1, medium: 1, high: 1 },
      authorMayApprove: false,
    });
    await expect(as(ALICE, planApprove, { planId: plan.id, version: plan.version })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("alice wrote a version of this plan (up to version 1) and may not approve it"),
    });
    const runId = await startAndWait(BOB, plan);
    await expect(as(ALICE, runDecide, { runId, stepId: "clean", approve: true })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("alice wrote a version of this plan and may not approve its steps"),
    });
    expect(await stepApprovals(runId)).toEqual([]);
    await as(BOB, runDecide, { runId, stepId: "clean", approve: true });
    expect((await stepApprovals(runId)).map((entry) => entry.actor)).toEqual(["bob"]);
  });

  it("refuses the author's approval of an agent's plan version in the engine's decision itself", async () => {
    harness = await startHarness({ worker: false });
    const agent: Identity = { kind: "agent", name: "ci-bot" };
    const { plan } = await runWaitingForApproval(agent, {
      approvals: { low: 1, medium: 1, high: 1 },
      authorMayApprove: false,
    });
    const runId = await startAndWait(BOB, plan);
    // Below every door: the engine refuses the author whoever calls it.
    await expect(
      withCaller(agent, () =>
        decideApproval(harness!.app.engine, { runId, stepId: "clean", approve: true, actor: "ci-bot" }),
      ),
    ).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("ci-bot wrote a version of this plan"),
    });
    const view = await as(BOB, runApproval, { runId, stepId: "clean" });
    expect(view.approval?.approvals).toMatchObject({ author: "ci-bot", given: [] });
  });

  it("the default policy keeps one approval by anyone, the author included", async () => {
    harness = await startHarness({ worker: false });
    const plan = await as(ALICE, planCreate, { draft: { goal: "clean", steps: [destructive] } });
    const runId = await startAndWait(ALICE, plan);
    expect(await approvedUnderPolicy(runId, "clean")).toBe(false);
    await as(ALICE, runDecide, { runId, stepId: "clean", approve: true });
    expect(await approvedUnderPolicy(runId, "clean")).toBe(true);
    expect(await stepStatus(ALICE, runId)).not.toBe("awaiting_approval");
  });
});

describe("roles", () => {
  it("a viewer cannot comment, a reviewer cannot approve, an approver cannot manage people", async () => {
    harness = await startHarness({ worker: false });
    const plan = await as(OWNER, planCreate, { draft: { goal: "clean", steps: [destructive] } });
    const viewer: Identity = { kind: "person", name: "vic", role: "viewer" };
    const reviewer: Identity = { kind: "person", name: "rita", role: "reviewer" };
    await expect(
      as(viewer, planComment, { planId: plan.id, version: plan.version, stepId: "clean", body: "why?" }),
    ).rejects.toMatchObject({
      code: "forbidden",
      message: "plan.comment needs the role reviewer or above; vic is a viewer.",
    });
    await as(reviewer, planComment, { planId: plan.id, version: plan.version, stepId: "clean", body: "why?" });
    await expect(as(reviewer, planApprove, { planId: plan.id, version: plan.version })).rejects.toMatchObject({
      code: "forbidden",
      message: "plan.approve needs the role approver or above; rita is a reviewer.",
    });
    const runId = await startAndWait(ALICE, plan);
    await expect(as(reviewer, runDecide, { runId, stepId: "clean", approve: true })).rejects.toMatchObject({
      code: "forbidden",
    });
    await expect(as(ALICE, peopleAdd, { kind: "person", name: "eve", role: "admin" })).rejects.toMatchObject({
      code: "forbidden",
      message: "people.add needs the role admin or above; alice is a approver.",
    });
    expect((await as(OWNER, peopleList, {})).principals.map((p) => p.name)).not.toContain("eve");
  });
});

describe("credentials at the door", () => {
  it("a person's own token signs them in with their role; revoked, it is refused on the next request", async () => {
    harness = await startHarness({ worker: false });
    api = await startApiServer(harness.app, {
      agentToken: "agent-token-for-tests-0123456789",
      accessToken: "owner-token-0123456789",
    });
    const { token, credentialId, principalId } = await as(OWNER, peopleAdd, {
      kind: "person",
      name: "carol",
      role: "reviewer",
    });
    expect(token).toMatch(/^swp_[A-Za-z0-9_-]{43}$/);
    const stored = await harness.app.db.pool.query(
      "select token_hash, session_hash from principal_credentials where id = $1",
      [credentialId],
    );
    expect(JSON.stringify(stored.rows)).not.toContain(token);

    const me = (headers: Record<string, string>) =>
      fetch(`${api!.url}/api/ops/people.me`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body: "{}",
      });
    const bearer = await me({ authorization: `Bearer ${token}` });
    expect(bearer.status).toBe(200);
    expect(await bearer.json()).toMatchObject({ name: "carol", kind: "person", role: "reviewer" });
    const cookie = await me({ cookie: `stepwise_session=${sessionValue(token)}` });
    expect(await cookie.json()).toMatchObject({ name: "carol" });
    // The role travels with the credential: a reviewer may not manage people.
    const list = await fetch(`${api.url}/api/ops/people.list`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
      body: "{}",
    });
    expect(list.status).toBe(403);
    // A role change applies to the next request.
    await as(OWNER, peopleSetRole, { principalId, role: "approver" });
    expect(await (await me({ authorization: `Bearer ${token}` })).json()).toMatchObject({ role: "approver" });

    await as(OWNER, peopleRevokeCredential, { credentialId });
    expect((await me({ authorization: `Bearer ${token}` })).status).toBe(401);
    expect((await me({ cookie: `stepwise_session=${sessionValue(token)}` })).status).toBe(401);
    // The owner's access token is untouched.
    expect((await me({ authorization: "Bearer owner-token-0123456789" })).status).toBe(200);

    // Who changed who may sign in, and how, is in the audit log under the admin's name.
    const audited = await harness.app.db.pool.query<{ actor: string; action: string; detail: Record<string, unknown> }>(
      "select actor, action, detail from audit_entries where plan_id = $1 order by id",
      [`people:${principalId}`],
    );
    expect(audited.rows).toEqual([
      { actor: "user", action: "person.added", detail: { name: "carol", kind: "person", role: "reviewer" } },
      { actor: "user", action: "person.role_changed", detail: { name: "carol", from: "reviewer", to: "approver" } },
      { actor: "user", action: "credential.revoked", detail: { name: "carol", credentialId } },
    ]);
    expect(JSON.stringify(audited.rows)).not.toContain(token);
  });

  it("a named agent's credential works where the agent token does, under the agent's name, and opens no page", async () => {
    harness = await startHarness({ worker: false });
    api = await startApiServer(harness.app, {
      agentToken: "agent-token-for-tests-0123456789",
      accessToken: "owner-token-0123456789",
    });
    const { token } = await as(OWNER, peopleAdd, { kind: "agent", name: "builder-7" });
    const answer = await fetch(`${api.url}/api/ops/people.me`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        authorization: `Bearer ${token}`,
        "x-stepwise-agent": "someone-else",
      },
      body: "{}",
    });
    expect(await answer.json()).toEqual({ name: "builder-7", kind: "agent", role: null });
    const page = await fetch(`${api.url}/decide/x`, { headers: { authorization: `Bearer ${token}` } });
    expect(page.status).toBe(403);

    // The shared agent token cannot go by a name someone holds a credential for — the named
    // agent's, or a person's — so it cannot act as them (or do the tasks leased to them).
    const shared = (name: string) =>
      fetch(`${api!.url}/api/ops/people.me`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          authorization: "Bearer agent-token-for-tests-0123456789",
          "x-stepwise-agent": name,
        },
        body: "{}",
      });
    for (const taken of ["builder-7", "user"]) {
      const refused = await shared(taken);
      expect(refused.status).toBe(403);
      expect(((await refused.json()) as { detail: string }).detail).toContain(`The name ${taken} belongs to`);
    }
    const free = await shared("helper-3");
    expect(free.status).toBe(200);
    expect(await free.json()).toEqual({ name: "helper-3", kind: "agent", role: null });
  });
});
