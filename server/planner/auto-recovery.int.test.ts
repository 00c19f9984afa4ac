import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { AUTO_RECOVERY_ACTOR, AUTO_RECOVERY_LIMIT } from "./auto-recovery";
import { readPlannerConfig } from "./config";
import { createPlannerDeps, installPlanner } from "./deps";

let harness: Harness;
let llm: ScriptedLlm;

beforeAll(async () => {
  harness = await startHarness();
  llm = await startScriptedLlm();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\nA demo project.\n");
});
afterAll(async () => {
  await llm.close();
  await harness.close();
});
beforeEach(() => {
  llm.reset();
  installPlanner(
    harness.app,
    createPlannerDeps(
      harness.app,
      readPlannerConfig({
        STEPWISE_LLM_BASE_URL: llm.baseUrl,
        STEPWISE_LLM_MODELS: "scripted-planner",
        STEPWISE_PLANNER_RETRIES: "0",
        // Generous: a busy machine can take seconds to answer from the scripted model, and a cut-off
        // call would fail the session. No test here waits for the timeout.
        STEPWISE_PLANNER_TIMEOUT_MS: "60000",
      }),
    ),
  );
});

async function startFailingRun(recovery?: "ask" | "auto") {
  const plan = await harness.caller.plans.createFromJson({
    planJson: JSON.stringify({
      goal: "Read the config",
      steps: [{ id: "step_1", description: "Read the config", tool: "read_file", args: { path: "config.json" } }],
    }),
  });
  return harness.caller.plans.approve({ planId: plan.id, version: 1, ...(recovery && { recovery }) });
}

async function waitForAudit(runId: string, action: string) {
  // A backstop only, by the clock rather than a count of polls that a busy machine makes slow.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const entry = await harness.app.db.prisma.auditEntry.findFirst({ where: { runId, action } });
    if (entry) return entry;
    if (Date.now() > deadline) throw new Error(`no ${action} audit entry for run ${runId}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

const retryWith = (file: string) => ({
  json: { reasoning: `Read ${file} instead.`, action: { kind: "retry", args: { path: file } } },
});

describe("run policy: automatic recovery", () => {
  it("under auto, a failed step gets a proposal that is applied without a person; under ask it waits", async () => {
    // The ask run fails first: had it queued an automatic recovery, that would take the one reply.
    const asked = await startFailingRun();
    expect((await harness.waitForRun(asked.runId, ["failed"])).recoveryPolicy).toBe("ask");
    llm.script(retryWith("README.md"));
    const auto = await startFailingRun("auto");
    const run = await harness.waitForRun(auto.runId, ["completed"]);
    expect(run.recoveryPolicy).toBe("auto");
    expect(run.steps[0]!.result?.value).toContain("A demo project.");

    const [proposal] = await harness.caller.planner.recoveryProposals({ runId: auto.runId });
    expect(proposal).toMatchObject({ status: "accepted", automatic: true, decidedBy: AUTO_RECOVERY_ACTOR });
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { runId: auto.runId } });
    expect(audit.filter((entry) => entry.actor === AUTO_RECOVERY_ACTOR).map((entry) => entry.action)).toEqual(
      expect.arrayContaining(["recovery.proposed", "recovery.accepted"]),
    );

    expect(llm.requests).toHaveLength(1);
    expect((await harness.caller.runs.get({ runId: asked.runId })).steps[0]!.status).toBe("failed");
    expect(await harness.caller.planner.recoveryProposals({ runId: asked.runId })).toEqual([]);

    // A re-run keeps the run's policy.
    const rerun = await harness.caller.runs.rerunFrom({ runId: auto.runId, stepId: "step_1" });
    expect((await harness.waitForRun(rerun.runId, ["completed"])).recoveryPolicy).toBe("auto");
  });

  it(`stops after ${AUTO_RECOVERY_LIMIT} automatic recoveries of a step and leaves it to a person`, async () => {
    llm.script(retryWith("missing-1.json"), retryWith("missing-2.json"), retryWith("README.md"));
    const { runId } = await startFailingRun("auto");
    const limit = await waitForAudit(runId, "recovery.auto_limit_reached");
    expect(limit.actor).toBe(AUTO_RECOVERY_ACTOR);
    const run = await harness.caller.runs.get({ runId });
    expect(run.status).toBe("failed");
    expect(run.steps[0]!.status).toBe("failed");
    const proposals = await harness.caller.planner.recoveryProposals({ runId });
    expect(proposals.map((p) => [p.status, p.automatic])).toEqual([
      ["accepted", true],
      ["accepted", true],
    ]);
    expect(llm.requests).toHaveLength(AUTO_RECOVERY_LIMIT);
    expect(llm.pending()).toBe(1);
  });

  it("never applies an abort automatically: it stays proposed for a person", async () => {
    llm.script({ json: { reasoning: "Nothing can be read; stop.", action: { kind: "abort" } } });
    const { runId } = await startFailingRun("auto");
    await waitForAudit(runId, "recovery.auto_held");
    const [proposal] = await harness.caller.planner.recoveryProposals({ runId });
    expect(proposal).toMatchObject({ status: "proposed", automatic: true, action: { kind: "abort" } });
    expect((await harness.caller.runs.get({ runId })).status).toBe("failed");
    // The person decides.
    const rejected = await harness.caller.planner.decideRecovery({ proposalId: proposal!.id, accept: false });
    expect(rejected).toMatchObject({ status: "rejected", decidedBy: "tester" });
  });
});
