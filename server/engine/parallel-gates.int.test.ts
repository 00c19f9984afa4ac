import { randomUUID } from "node:crypto";
import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import {
  createProbeRegistry,
  executionsByStep,
  illegalTransitions,
  readProbeLog,
  sequenceProblems,
} from "../../tests/probe-tool";
import { readEvents } from "../events/store";
import type { StoredEvent } from "../events/types";
import { createTrpcContext } from "../trpc/init";
import { createCaller } from "../trpc/root";
import { executeStepJob } from "./engine";

let harness: Harness | undefined;
let probeLog: string | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
  if (probeLog) await fs.rm(probeLog, { force: true });
  probeLog = undefined;
});

async function startWithProbe(options: { worker: boolean }): Promise<{ h: Harness; log: string }> {
  probeLog = path.join(os.tmpdir(), `stepwise-probe-${randomUUID()}.log`);
  harness = await startHarness({ worker: options.worker, tools: createProbeRegistry({ logFile: probeLog }) });
  return { h: harness, log: probeLog };
}

const gated = (id: string, value: string) => ({
  id,
  description: `gate ${value}`,
  tool: "probe",
  args: { value },
  approvalRequired: true,
});
const after = (id: string, dependsOn: string, value: unknown) => ({
  id,
  description: `after ${dependsOn}`,
  tool: "probe",
  args: { value },
  dependsOn: [dependsOn],
});

/**
 * Three gates in parallel branches: A (step_1), B (step_2), C (step_3).
 * step_4 needs A's output; step_5 needs B's output; step_6 only comes after B; step_7 needs C's
 * output; step_8 has no gate at all.
 */
const BRANCHES = [
  gated("step_1", "A"),
  gated("step_2", "B"),
  gated("step_3", "C"),
  after("step_4", "step_1", "$step_1"),
  after("step_5", "step_2", "$step_2"),
  after("step_6", "step_2", "ordered after B only"),
  after("step_7", "step_3", "$step_3"),
  { id: "step_8", description: "ungated", tool: "probe", args: { value: "free" } },
];

/** Waiting for the engine, not timing it: generous, so a loaded machine cannot fail the test. */
const SETTLE = { timeout: 15_000 };

type Order = "approve A then deny B" | "deny B then approve A" | "approve A and deny B at once";
const ORDERS: Order[] = ["approve A then deny B", "deny B then approve A", "approve A and deny B at once"];

describe("approval gates in parallel branches", () => {
  it.each(ORDERS)(
    "%s, with C still pending: each decision affects only its own branch",
    async (order) => {
      const { h, log } = await startWithProbe({ worker: true });
      const alice = createCaller(createTrpcContext(h.app, { kind: "person", name: "alice" }));
      const bob = createCaller(createTrpcContext(h.app, { kind: "person", name: "bob" }));
      const plan = await h.caller.plans.createFromJson({
        planJson: JSON.stringify({ goal: "gates", steps: BRANCHES }),
      });
      const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
      const statuses = async () =>
        Object.fromEntries((await h.caller.runs.get({ runId })).steps.map((s) => [s.stepId, s.status]));
      const executions = async () => executionsByStep(await readProbeLog(log));

      // Gates wait; the ungated branch is not held up by them.
      await expect
        .poll(statuses, SETTLE)
        .toMatchObject({ step_1: "awaiting_approval", step_2: "awaiting_approval", step_3: "awaiting_approval" });
      await expect.poll(async () => (await statuses()).step_8, SETTLE).toBe("completed");
      expect([...(await executions()).keys()]).toEqual(["step_8"]);

      const approveA = async () => {
        await alice.runs.decide({ runId, stepId: "step_1", approve: true });
        await expect.poll(async () => (await statuses()).step_4, SETTLE).toBe("completed");
      };
      const denyB = async () => {
        await bob.runs.decide({ runId, stepId: "step_2", approve: false, comment: "not today" });
        await expect.poll(async () => (await statuses()).step_6, SETTLE).toBe("completed");
      };
      if (order === "approve A then deny B") {
        await approveA();
        // Approving A neither ran nor decided B or C.
        expect(await statuses()).toMatchObject({ step_2: "awaiting_approval", step_3: "awaiting_approval" });
        expect((await executions()).has("step_2")).toBe(false);
        await denyB();
      } else if (order === "deny B then approve A") {
        await denyB();
        // Denying B neither skipped nor started A or C.
        expect(await statuses()).toMatchObject({ step_1: "awaiting_approval", step_3: "awaiting_approval" });
        expect((await executions()).has("step_1")).toBe(false);
        await approveA();
      } else {
        await Promise.all([approveA(), denyB()]);
      }

      let run = await h.caller.runs.get({ runId });
      expect(run.status).toBe("running");
      expect(Object.fromEntries(run.steps.map((s) => [s.stepId, s.status]))).toEqual({
        step_1: "completed",
        step_2: "skipped",
        step_3: "awaiting_approval",
        step_4: "completed",
        step_5: "skipped",
        step_6: "completed",
        step_7: "pending",
        step_8: "completed",
      });
      const reasonOf = (id: string) => run.steps.find((s) => s.stepId === id)!.reason;
      expect(reasonOf("step_2")).toBe("Approval denied by bob: not today");
      expect(reasonOf("step_5")).toMatch(/step_2 was skipped and its output is needed/);

      // A second decision on a decided step is refused and changes nothing.
      const before = {
        lastSeq: run.lastSeq,
        approvals: await h.app.db.prisma.approval.count({ where: { runId } }),
        audit: await h.app.db.prisma.auditEntry.count({ where: { runId } }),
      };
      await expect(bob.runs.decide({ runId, stepId: "step_1", approve: false })).rejects.toMatchObject({
        code: "PRECONDITION_FAILED",
        message: "step_1 is completed, not awaiting approval",
      });
      await expect(alice.runs.decide({ runId, stepId: "step_2", approve: true })).rejects.toMatchObject({
        code: "PRECONDITION_FAILED",
        message: "step_2 is skipped, not awaiting approval",
      });
      await expect(alice.runs.decide({ runId, stepId: "step_7", approve: true })).rejects.toMatchObject({
        code: "PRECONDITION_FAILED",
        message: "step_7 is pending, not awaiting approval",
      });
      // Repeating a decision (a double click, a retried request) answers with the recorded one.
      await alice.runs.decide({ runId, stepId: "step_1", approve: true });
      await bob.runs.decide({ runId, stepId: "step_2", approve: false });
      expect({
        lastSeq: (await h.caller.runs.get({ runId })).lastSeq,
        approvals: await h.app.db.prisma.approval.count({ where: { runId } }),
        audit: await h.app.db.prisma.auditEntry.count({ where: { runId } }),
      }).toEqual(before);

      await h.caller.runs.decide({ runId, stepId: "step_3", approve: true });
      run = await h.waitForRun(runId, ["completed", "failed", "cancelled"]);
      expect(run.status).toBe("completed");

      // Every approved or ungated step ran exactly once; denied and skipped ones never ran.
      const ran = await executions();
      expect(Object.fromEntries([...ran].map(([id, list]) => [id, list.length]))).toEqual({
        step_1: 1,
        step_3: 1,
        step_4: 1,
        step_6: 1,
        step_7: 1,
        step_8: 1,
      });

      // Every decision is audited and recorded with who and when.
      const audit = await h.app.db.prisma.auditEntry.findMany({
        where: { runId, action: { in: ["step.approved", "step.denied"] } },
        orderBy: { id: "asc" },
      });
      expect(audit.map((a) => `${a.action}:${a.stepId}:${a.actor}`).sort()).toEqual(
        ["step.approved:step_1:alice", "step.denied:step_2:bob", "step.approved:step_3:tester"].sort(),
      );
      for (const entry of audit) {
        expect(entry.createdAt).toBeInstanceOf(Date);
        expect(entry.planVersion).toBe(1);
      }
      const approvals = await h.app.db.prisma.approval.findMany({ where: { runId }, orderBy: { stepId: "asc" } });
      expect(approvals.map((a) => [a.stepId, a.decision, a.actor, a.planVersion, a.comment])).toEqual([
        ["step_1", "approved", "alice", 1, null],
        ["step_2", "denied", "bob", 1, "not today"],
        ["step_3", "approved", "tester", 1, null],
      ]);

      // No gated step started before its approval; the denied one never started.
      const events = await readEvents(h.app.db.pool, runId, 0);
      for (const stepId of ["step_1", "step_2", "step_3"]) {
        const decided = events.find((e) => e.type === "approval.decided" && e.stepId === stepId) as Extract<
          StoredEvent,
          { type: "approval.decided" }
        >;
        const started = events.filter((e) => e.type === "step.running" && e.stepId === stepId);
        if (decided.data.decision === "approved") {
          expect(started).toHaveLength(1);
          expect(started[0]!.seq).toBeGreaterThan(decided.seq);
        } else {
          expect(started).toHaveLength(0);
        }
      }
      expect(sequenceProblems(events)).toEqual([]);
      expect(illegalTransitions(events)).toEqual([]);
    },
    60_000,
  );

  it("the job function refuses to run a gated step that has no approval row, whatever its status says, and puts it back to awaiting approval", async () => {
    const { h, log } = await startWithProbe({ worker: false });
    const plan = await h.caller.plans.createFromJson({
      planJson: JSON.stringify({ goal: "gates", steps: [gated("step_1", "A"), gated("step_2", "B")] }),
    });
    const { runId } = await h.caller.plans.approve({ planId: plan.id, version: plan.version });
    const job = { runId, stepId: "step_1", attempt: 1 };
    const stepRow = async () =>
      (
        await h.app.db.pool.query<{ status: string; attempt: number }>(
          "select status, attempt from run_steps where run_id = $1 and step_id = 'step_1'",
          [runId],
        )
      ).rows[0];
    const lastSeq = async () => (await h.caller.runs.get({ runId })).lastSeq;
    expect(await stepRow()).toEqual({ status: "awaiting_approval", attempt: 0 });
    const seqBefore = await lastSeq();

    // While it awaits approval, a job for it does nothing.
    await executeStepJob(h.app.engine, job);
    expect(await stepRow()).toEqual({ status: "awaiting_approval", attempt: 0 });

    // Even if its row is forced to ready behind the engine's back, no approval row means no run —
    // neither a denial nor an approval of another plan version counts.
    await h.app.db.pool.query("update run_steps set status = 'ready' where run_id = $1 and step_id = 'step_1'", [
      runId,
    ]);
    await h.app.db.pool.query(
      `insert into approvals (run_id, step_id, plan_version, decision, actor) values
         ($1, 'step_1', 1, 'denied', 'mallory'), ($1, 'step_1', 2, 'approved', 'mallory')`,
      [runId],
    );
    await executeStepJob(h.app.engine, job);
    expect(await stepRow()).toEqual({ status: "awaiting_approval", attempt: 0 });
    const events = await readEvents(h.app.db.pool, runId, seqBefore);
    expect(events.map((e) => [e.type, e.stepId])).toEqual([
      ["step.awaiting_approval", "step_1"],
      ["approval.requested", "step_1"],
    ]);
    expect(await readProbeLog(log)).toEqual([]);
    // The run's parallelism count is untouched: the forced row was never queued.
    const active = await h.app.db.pool.query<{ active_steps: number }>("select active_steps from runs where id = $1", [
      runId,
    ]);
    expect(active.rows[0]!.active_steps).toBe(0);

    // The same job function runs a properly approved sibling, so the refusal above is the gate.
    await h.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    await executeStepJob(h.app.engine, { runId, stepId: "step_2", attempt: 1 });
    const steps = (await h.caller.runs.get({ runId })).steps;
    expect(steps.find((s) => s.stepId === "step_2")!.status).toBe("completed");
    expect((await readProbeLog(log)).map((e) => e.stepId)).toEqual(["step_2"]);
  });
});
