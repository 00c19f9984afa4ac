import { afterEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { startHarness, type Harness } from "../../tests/app-harness";
import { agentStart, agentStatus, agentUpdate } from "../operations/agent";
import type { Identity } from "../identity";
import { invokeOperation, type Operation } from "../operations/operation";
import { workspaceSetPolicy } from "../operations/people";
import { planApprove, planCreate } from "../operations/plans";
import { workspaceForPlan } from "../operations/workspaces";

/**
 * A workspace whose approver policy says "the author may not approve": an agent's `start` writes
 * the session's plan, so the agent cannot approve it. The session waits for someone else's
 * approval — `status` says whose — and that approval's run becomes the session, with no plan or
 * run left that no session knows of.
 */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const OWNER: Identity = { kind: "person", name: "user" };
const ALICE: Identity = { kind: "person", name: "alice", role: "approver" };
const AGENT: Identity = { kind: "agent", name: "coder" };

function as<I extends z.ZodType, O extends z.ZodType>(identity: Identity, operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity }, input);
}

async function authorMayNotApprove() {
  // The default workspace, registered by a person's first plan there.
  const plan = await as(OWNER, planCreate, {
    draft: { goal: "look", steps: [{ id: "step_1", description: "say", tool: "echo", args: { value: 1 } }] },
  });
  const { id: workspaceId } = await as(OWNER, workspaceForPlan, { planId: plan.id });
  await as(OWNER, workspaceSetPolicy, {
    workspaceId,
    policy: { approvals: { low: 1, medium: 1, high: 1 }, authorMayApprove: false },
  });
}

async function agentPlans() {
  const rows = await harness!.app.db.pool.query<{ plan_id: string; runs: number }>(
    `select v.plan_id, (select count(*)::int from runs r where r.plan_id = v.plan_id) as runs
     from plan_versions v where v.author = $1`,
    [AGENT.name],
  );
  return rows.rows;
}

describe("an agent's session under 'the author may not approve'", () => {
  it("waits for another approver, says whose approval it waits for, and becomes the session once approved", async () => {
    harness = await startHarness({ worker: false });
    await authorMayNotApprove();

    const started = await as(AGENT, agentStart, { goal: "Add a health check endpoint" });
    expect(started).toMatchObject({ status: "session_created", awaiting_approval: { author: "coder" } });
    const planId = started.awaiting_approval!.plan_id;
    // One plan: the session's, with no run yet.
    expect(await agentPlans()).toEqual([{ plan_id: planId, runs: 0 }]);

    const waiting = await as(AGENT, agentStatus, {});
    expect(waiting.session.id).toBe(started.session_id);
    expect(waiting.now.reason).toBe("waiting");
    expect(waiting.now).toMatchObject({
      message: expect.stringContaining(`Waiting for a person other than coder to approve plan ${planId}`),
    });
    // The same answer when the session is named.
    expect((await as(AGENT, agentStatus, { session: started.session_id })).now.reason).toBe("waiting");
    await expect(
      as(AGENT, agentUpdate, { payload: { update_tasks: [{ id: 1, status: "IN_PROGRESS" }] } }),
    ).rejects.toMatchObject({ message: expect.stringContaining("Waiting for a person other than coder") });

    // The agent itself still may not approve; another approver may.
    await expect(as(AGENT, planApprove, { planId, version: 1 })).rejects.toMatchObject({ code: "forbidden" });
    const { runId } = await as(ALICE, planApprove, { planId, version: 1 });

    const session = await harness.app.db.pool.query<{ id: string; run_id: string; created_by: string }>(
      "select id, run_id, created_by from agent_sessions where plan_id = $1",
      [planId],
    );
    expect(session.rows).toEqual([{ id: started.session_id, run_id: runId, created_by: "coder" }]);
    const afterApproval = await as(AGENT, agentStatus, {});
    expect(afterApproval.session.id).toBe(started.session_id);
    expect(afterApproval.now.reason).toBe("sync_instructions");
    expect(await agentPlans()).toEqual([{ plan_id: planId, runs: 1 }]);
  });
});
