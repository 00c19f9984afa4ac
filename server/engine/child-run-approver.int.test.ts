import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import type { Identity } from "../identity";
import { invokeOperation } from "../operations/operation";
import { findOperation } from "../operations/registry";
import { startChildRun } from "./child-runs";
import { executeStepJob } from "./engine";

/**
 * A sub-plan's child run starts in a job just after its parent step's claim, approved by the
 * person whose approval let the step run. The policy is asked again when the child starts: an
 * approver demoted, or with every credential revoked, between the claim and the job does not
 * start it — the step waits for a new decision, saying why — and a new approver's decision does.
 * No worker: the test claims and runs the job itself, so that the change falls exactly between.
 */
let harness: Harness;
beforeAll(async () => {
  harness = await startHarness({ worker: false });
});
afterAll(() => harness.close());

const OWNER: Identity = { kind: "person", name: "tester" };
let people = 0;

async function as(identity: Identity, name: string, input: unknown) {
  return invokeOperation(findOperation(name)!, { app: harness.app, identity }, input);
}

async function approver(): Promise<{ identity: Identity; principalId: string; credentialId: string }> {
  const name = `approver-${++people}`;
  const made = (await as(OWNER, "people.add", { kind: "person", name, role: "approver" })) as {
    principalId: string;
    credentialId: string;
  };
  return { identity: { kind: "person", name, role: "approver", tokenId: made.credentialId }, ...made };
}

async function stepRow(runId: string, stepId: string) {
  const { rows } = await harness.app.db.pool.query<{ status: string; attempt: number; reason: string | null }>(
    "select status, attempt, reason from run_steps where run_id = $1 and step_id = $2",
    [runId, stepId],
  );
  return rows[0]!;
}

/** Claims the step as the engine does (it must be ready). */
async function claim(runId: string, stepId: string) {
  const row = await stepRow(runId, stepId);
  expect(row.status).toBe("ready");
  await executeStepJob(harness.app.engine, { runId, stepId, attempt: row.attempt + 1 });
}

async function children(runId: string) {
  const { rows } = await harness.app.db.pool.query<{ id: string; approved_by: string }>(
    "select id, approved_by from runs where parent_run_id = $1",
    [runId],
  );
  return rows;
}

/** A parent run whose `run_plan` step is approved by `by` and claimed: its child's job is next. */
async function claimedSubPlanStep(by: Identity) {
  const child = (await as(OWNER, "plan.create", {
    draft: { goal: "child", steps: [{ id: "c", description: "child work", tool: "echo", args: { value: 1 } }] },
  })) as { id: string };
  const parent = (await as(OWNER, "plan.create", {
    draft: {
      goal: "parent",
      steps: [{ id: "sub", description: "run the child", tool: "run_plan", args: { plan_id: child.id, version: 1 } }],
    },
  })) as { id: string; version: number };
  const { runId } = (await as(OWNER, "plan.approve", { planId: parent.id, version: parent.version })) as {
    runId: string;
  };
  expect((await stepRow(runId, "sub")).status).toBe("awaiting_approval");
  await as(by, "run.decide", { runId, stepId: "sub", approve: true });
  await claim(runId, "sub");
  const { status, attempt } = await stepRow(runId, "sub");
  expect(status).toBe("running");
  const job = { runId, stepId: "sub", attempt, args: { plan_id: child.id, version: 1 } };
  return { runId, job };
}

describe("a sub-plan's approver is asked again when the child starts", () => {
  for (const change of ["demoted to reviewer", "every credential revoked"] as const) {
    it(`${change} between the claim and the job: no child, the step waits for a new decision`, async () => {
      const ann = await approver();
      const { runId, job } = await claimedSubPlanStep(ann.identity);
      if (change === "demoted to reviewer") {
        await as(OWNER, "people.set_role", { principalId: ann.principalId, role: "reviewer" });
      } else {
        await as(OWNER, "people.revoke_credential", { credentialId: ann.credentialId });
      }

      await startChildRun(harness.app.engine, job);
      expect(await children(runId)).toEqual([]);
      const held = await stepRow(runId, "sub");
      expect(held.status).toBe("awaiting_approval");
      expect(held.reason).toContain(`${ann.identity.name} may not approve it now`);
      const audit = await harness.app.db.pool.query<{ detail: { reason: string } }>(
        "select detail from audit_entries where run_id = $1 and action = 'run.child_held'",
        [runId],
      );
      expect(audit.rows.map((row) => row.detail.reason)).toEqual([held.reason]);
      // The job delivered again finds the step no longer running: still nothing starts.
      await startChildRun(harness.app.engine, job);
      expect(await children(runId)).toEqual([]);

      // A person who may approve it now decides again: the child starts, approved by them.
      const bea = await approver();
      await as(bea.identity, "run.decide", { runId, stepId: "sub", approve: true });
      await claim(runId, "sub");
      await startChildRun(harness.app.engine, { ...job, attempt: (await stepRow(runId, "sub")).attempt });
      expect(await children(runId)).toEqual([expect.objectContaining({ approved_by: bea.identity.name })]);
    });
  }

  it("an approver who keeps the right starts the child as before", async () => {
    const ann = await approver();
    const { runId, job } = await claimedSubPlanStep(ann.identity);
    await startChildRun(harness.app.engine, job);
    expect(await children(runId)).toEqual([expect.objectContaining({ approved_by: ann.identity.name })]);
    expect((await stepRow(runId, "sub")).status).toBe("running");
  });
});
