import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { executeStepJob } from "../engine/engine";
import type { Identity } from "../identity";
import { invokeOperation } from "../operations/operation";
import { findOperation } from "../operations/registry";
import { builtinTools, createToolRegistry } from "../tools/registry";
import { defineTool } from "../tools/types";

/**
 * The attacks on authority found from outside, through the operations every door adapts: the
 * authority policy (server/policy/authority.ts) decides at the moment of effect — the edit, the
 * decision, the claim — with roles as they are then and every author of the plan.
 */
let harness: Harness | undefined;
const cleanup: string[] = [];
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  for (const dir of cleanup.splice(0)) await fs.rm(dir, { recursive: true, force: true });
});

const OWNER: Identity = { kind: "person", name: "user" };
const AGENT: Identity = { kind: "agent", name: "bot" };
const RITA: Identity = { kind: "person", name: "rita", role: "reviewer" };
const ALICE: Identity = { kind: "person", name: "alice", role: "approver" };
const BOB: Identity = { kind: "person", name: "bob", role: "approver" };
const CAROL: Identity = { kind: "person", name: "carol", role: "approver" };

function call(name: string, identity: Identity, input: unknown) {
  return invokeOperation(findOperation(name)!, { app: harness!.app, identity }, input);
}

/** A tool with an effect (it writes a marker file) and no default gate. */
function markerTool(marker: string) {
  return defineTool({
    name: "touch_marker",
    description: "Writes a marker file (test tool with a side effect and no default gate)",
    inputSchema: z.object({ text: z.string().default("ran") }),
    capability: "data.transform",
    capabilityLabel: "Write a marker",
    readOnly: false,
    destructive: false,
    idempotent: true,
    requiresApproval: false,
    defaultTimeoutSeconds: 10,
    async execute({ text }) {
      await fs.writeFile(marker, text);
      return { ok: true };
    },
  });
}

async function stepStatus(runId: string, stepId: string): Promise<string | undefined> {
  const row = await harness!.app.db.pool.query<{ status: string }>(
    "select status from run_steps where run_id = $1 and step_id = $2",
    [runId, stepId],
  );
  return row.rows[0]?.status;
}

const waitFor = (runId: string, stepId: string, status: string) =>
  expect.poll(() => stepStatus(runId, stepId), { timeout: 60_000 }).toBe(status);

/** `rm -rf build` is high risk by its computed assessment and gated by default. */
const destructive = { id: "clean", description: "clean the build", tool: "shell", args: { command: "rm -rf build" } };

async function setPolicy(planId: string, policy: { approvals: Record<string, number>; authorMayApprove: boolean }) {
  const { id: workspaceId } = (await call("workspace.for_plan", OWNER, { planId })) as { id: string };
  await call("workspace.set_approver_policy", OWNER, { workspaceId, policy });
}

describe("authority at the moment of effect", () => {
  it("a reviewer's ungated step with an effect added to a running agent session waits for an approver", async () => {
    const dir = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-policy-"));
    cleanup.push(dir);
    const marker = path.join(dir, "marker");
    harness = await startHarness({ tools: createToolRegistry([...builtinTools, markerTool(marker)]) });
    await call("agent.start", AGENT, { goal: "Change something" });
    const session = await harness.app.db.pool.query<{ plan_id: string; run_id: string }>(
      "select plan_id, run_id from agent_sessions order by created_at desc limit 1",
    );
    const { plan_id: planId, run_id: runId } = session.rows[0]!;
    const current = (await call("plan.get", RITA, { planId })) as { version: number; steps: unknown[] };
    const edited = (await call("plan.edit", RITA, {
      planId,
      baseVersion: current.version,
      edit: {
        kind: "addStep",
        position: current.steps.length,
        step: { tool: "touch_marker", args: { text: "reviewer" }, approvalRequired: false },
      },
    })) as { version: number; steps: { id: string; approvalRequired: boolean }[] };
    const added = edited.steps.at(-1)!;
    expect(added.approvalRequired).toBe(true);
    await waitFor(runId, added.id, "awaiting_approval");
    // Turning the gate off again is an approval decision a reviewer may not make: it stays up.
    const again = (await call("plan.edit", RITA, {
      planId,
      baseVersion: edited.version,
      edit: { kind: "updateStep", stepId: added.id, changes: { approvalRequired: false } },
    })) as { steps: { id: string; approvalRequired: boolean }[] };
    expect(again.steps.find((step) => step.id === added.id)?.approvalRequired).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await stepStatus(runId, added.id)).toBe("awaiting_approval");
    await expect(fs.stat(marker)).rejects.toMatchObject({ code: "ENOENT" });
  });

  it("under 2 approvals for high risk a waiver is one approver's decision, not a bypass of the count", async () => {
    harness = await startHarness();
    const plan = (await call("plan.create", OWNER, { draft: { goal: "clean", steps: [destructive] } })) as {
      id: string;
    };
    await setPolicy(plan.id, { approvals: { low: 1, medium: 1, high: 2 }, authorMayApprove: true });
    const waive = (identity: Identity) =>
      call("plan.edit", identity, {
        planId: plan.id,
        baseVersion: 1,
        edit: { kind: "updateStep", stepId: "clean", changes: { approvalRequired: false } },
      });
    await expect(waive(RITA)).rejects.toMatchObject({ code: "forbidden" });
    await waive(ALICE);
    const { runId } = (await call("plan.approve", BOB, { planId: plan.id, version: 2 })) as { runId: string };
    await waitFor(runId, "clean", "awaiting_approval");
    const waiting = (await call("run.approval", BOB, { runId, stepId: "clean" })) as {
      approval?: { approvals?: { given: string[]; required: number } };
    };
    expect(waiting.approval?.approvals).toMatchObject({ given: ["alice"], required: 2 });
    const audit = await harness.app.db.pool.query<{ actor: string; detail: Record<string, unknown> }>(
      "select actor, detail from audit_entries where plan_id = $1 and action = 'gate.waived'",
      [plan.id],
    );
    expect(audit.rows).toEqual([
      { actor: "alice", detail: expect.objectContaining({ decision: "gate.lower", rule: "approvers-decide" }) },
    ]);
    await call("run.decide", BOB, { runId, stepId: "clean", approve: true });
    await waitFor(runId, "clean", "completed");
  });

  it("the author rule covers every author: A wrote v1, B wrote v2, A may not approve the plan or its step", async () => {
    harness = await startHarness({ worker: false });
    const plan = (await call("plan.create", ALICE, { draft: { goal: "clean", steps: [destructive] } })) as {
      id: string;
    };
    await setPolicy(plan.id, { approvals: { low: 1, medium: 1, high: 1 }, authorMayApprove: false });
    await call("plan.edit", BOB, {
      planId: plan.id,
      baseVersion: 1,
      edit: { kind: "updatePlan", changes: { goal: "clean the build" } },
    });
    await expect(call("plan.approve", ALICE, { planId: plan.id, version: 2 })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("alice wrote a version of this plan"),
    });
    const { runId } = (await call("plan.approve", CAROL, { planId: plan.id, version: 2 })) as { runId: string };
    await waitFor(runId, "clean", "awaiting_approval");
    await expect(call("run.decide", ALICE, { runId, stepId: "clean", approve: true })).rejects.toMatchObject({
      code: "forbidden",
      message: expect.stringContaining("alice wrote a version of this plan"),
    });
    await expect(call("run.decide", BOB, { runId, stepId: "clean", approve: true })).rejects.toMatchObject({
      code: "forbidden",
    });
    await call("run.decide", CAROL, { runId, stepId: "clean", approve: true });
    await waitFor(runId, "clean", "ready");
  });

  it("an approver demoted to reviewer before the claim: their approval no longer lets the step run", async () => {
    harness = await startHarness({ worker: false });
    const { principalId } = (await call("people.add", OWNER, { kind: "person", name: "dave", role: "approver" })) as {
      principalId: string;
    };
    const dave: Identity = { kind: "person", name: "dave", role: "approver" };
    const plan = (await call("plan.create", OWNER, { draft: { goal: "clean", steps: [destructive] } })) as {
      id: string;
      version: number;
    };
    const { runId } = (await call("plan.approve", OWNER, { planId: plan.id, version: plan.version })) as {
      runId: string;
    };
    await waitFor(runId, "clean", "awaiting_approval");
    await call("run.decide", dave, { runId, stepId: "clean", approve: true });
    await waitFor(runId, "clean", "ready");
    await call("people.set_role", OWNER, { principalId, role: "reviewer" });
    const row = await harness.app.db.pool.query<{ attempt: number }>(
      "select attempt from run_steps where run_id = $1 and step_id = 'clean'",
      [runId],
    );
    await executeStepJob(harness.app.engine, { runId, stepId: "clean", attempt: row.rows[0]!.attempt + 1 });
    expect(await stepStatus(runId, "clean")).toBe("awaiting_approval");
    const reason = await harness.app.db.pool.query<{ reason: string }>(
      "select reason from run_steps where run_id = $1 and step_id = 'clean'",
      [runId],
    );
    expect(reason.rows[0]!.reason).toContain("dave may not approve it now");
  });
});
