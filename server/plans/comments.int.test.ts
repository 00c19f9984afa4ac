import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { goodPlan } from "../../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { invokeOperation } from "../operations/operation";
import { findOperation } from "../operations/registry";
import type { Identity } from "../identity";
import { readPlannerConfig } from "../planner/config";
import { createPlannerDeps, installPlanner, type PlannerDeps } from "../planner/deps";
import { settlePlanning } from "../planner/sessions";
import { enterPlanMode, submitPlan, submitPlanInput } from "../planner/plan-mode";

/**
 * Review as a conversation, against real PostgreSQL and the real planner behind a scripted model:
 * threads on steps and arguments kept across versions, answered when a later version changes what
 * they are about, revise-from-comments through the planner and back to an authoring agent.
 */
let harness: Harness;
let llm: ScriptedLlm;
let planner: PlannerDeps;

const person: Identity = { kind: "person", name: "ann" };
const agent: Identity = { kind: "agent", name: "coder" };
const call = (identity: Identity, name: string, input: unknown) =>
  invokeOperation(findOperation(name)!, { app: harness.app, identity }, input) as Promise<Record<string, unknown>>;
const threads = async (planId: string) =>
  (await call(person, "plan.comments", { planId })).comments as {
    id: string;
    stepId: string | null;
    field: string | null;
    intent: string;
    body: string;
    author: string;
    authorKind: string;
    resolved: unknown;
    answeredInVersion: number | null;
    replies: { body: string; author: string }[];
  }[];

beforeAll(async () => {
  harness = await startHarness();
  llm = await startScriptedLlm();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\nA demo project.\n");
});
afterAll(async () => {
  if (planner) await settlePlanning(planner);
  await llm.close();
  await harness.close();
});
beforeEach(() => {
  llm.reset();
  planner = createPlannerDeps(
    harness.app,
    readPlannerConfig({
      STEPWISE_LLM_BASE_URL: llm.baseUrl,
      STEPWISE_LLM_MODELS: "scripted-planner",
      STEPWISE_LLM_NAME: "Scripted",
      STEPWISE_PLANNER_RETRIES: "0",
      // Generous: a busy machine can take seconds to answer from the scripted model, and a cut-off
      // call would fail the session. No test here waits for the timeout.
      STEPWISE_PLANNER_TIMEOUT_MS: "60000",
    }),
  );
  installPlanner(harness.app, planner);
});

async function manualPlan(goal: string) {
  return harness.caller.plans.createFromJson({
    planJson: JSON.stringify({
      goal,
      steps: [
        { id: "step_1", description: "Say one", tool: "echo", args: { value: 1 } },
        { id: "step_2", description: "Say two", tool: "echo", args: { value: 2 }, dependsOn: ["step_1"] },
      ],
    }),
  });
}

describe("comment threads", () => {
  it("keeps threads per step across versions and marks a comment answered when its step changes", async () => {
    const plan = await manualPlan("Comment on steps");
    const onStep = await call(person, "plan.comment", {
      planId: plan.id,
      version: 1,
      stepId: "step_2",
      field: "args.value",
      intent: "change",
      body: "Say three instead",
    });
    await call(agent, "plan.comment", { planId: plan.id, version: 1, parentId: onStep.id, body: "Why three?" });
    const onOther = await call(person, "plan.comment", {
      planId: plan.id,
      version: 1,
      stepId: "step_1",
      intent: "comment",
      body: "Fine as it is",
    });
    const onPlan = await call(agent, "plan.comment", { planId: plan.id, version: 1, body: "Looks complete" });

    let listed = await threads(plan.id);
    expect(listed.map((thread) => thread.id)).toEqual([onStep.id, onOther.id, onPlan.id]);
    expect(listed[0]).toMatchObject({
      stepId: "step_2",
      field: "args.value",
      intent: "change",
      author: "ann",
      authorKind: "person",
      answeredInVersion: null,
      replies: [{ body: "Why three?", author: "coder" }],
    });
    expect(listed[2]).toMatchObject({ stepId: null, authorKind: "agent" });

    // An edit of another field of step_2 does not answer a comment on args.value; changing the value does.
    await harness.caller.plans.edit({
      planId: plan.id,
      baseVersion: 1,
      edit: { kind: "updateStep", stepId: "step_2", changes: { description: "Say it louder" } },
    });
    listed = await threads(plan.id);
    expect(listed[0]!.answeredInVersion).toBeNull();
    expect(listed[1]!.answeredInVersion).toBeNull(); // step_1 did not change
    expect(listed[2]!.answeredInVersion).toBe(2); // any new version answers a plan-wide comment
    await harness.caller.plans.edit({
      planId: plan.id,
      baseVersion: 2,
      edit: { kind: "updateStep", stepId: "step_2", changes: { args: { value: 3 } } },
    });
    listed = await threads(plan.id);
    expect(listed[0]!.answeredInVersion).toBe(3);
    expect(listed[1]!.answeredInVersion).toBeNull();

    // Resolving is per thread, and reopening works; comments on an old version are refused.
    await call(person, "plan.comment_resolve", { planId: plan.id, commentId: onOther.id });
    expect((await threads(plan.id))[1]!.resolved).toMatchObject({ by: "ann" });
    await call(person, "plan.comment_resolve", { planId: plan.id, commentId: onOther.id, resolved: false });
    expect((await threads(plan.id))[1]!.resolved).toBeNull();
    await expect(
      call(person, "plan.comment", { planId: plan.id, version: 1, stepId: "step_1", body: "late" }),
    ).rejects.toMatchObject({ code: "version_conflict" });

    // The Markdown export carries the open threads under their steps.
    const markdown = await harness.caller.plans.export({ planId: plan.id, format: "markdown" });
    expect(markdown.content).toContain("**ann** — change this `args.value`: Say three instead (answered in v3)");
    expect(markdown.content).toContain("  - **coder**: Why three?");
  });

  it("refuses bad comments with a clear error and stores nothing", async () => {
    const plan = await manualPlan("Bad comments");
    const bad = [
      { planId: plan.id, version: 1, stepId: "step_9", body: "no such step" },
      { planId: plan.id, version: 1, stepId: "step_1", body: "   " },
      { planId: plan.id, version: 1, field: "args.value", body: "a field without a step" },
      { planId: plan.id, version: 1, stepId: "step_1", intent: "shout", body: "unknown intent" },
      { planId: "plan-nope", version: 1, body: "no plan" },
    ];
    for (const input of bad) await expect(call(person, "plan.comment", input)).rejects.toThrow();
    expect(await threads(plan.id)).toEqual([]);
  });
});

describe("revise from comments", () => {
  it("sends the open comments to the planner; the new version answers the one it changed and the other stays open", async () => {
    llm.script({ json: goodPlan });
    const { sessionId: first } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    await settlePlanning(planner);
    const planId = (await harness.caller.planner.session({ sessionId: first })).planId!;
    const change = await call(person, "plan.comment", {
      planId,
      version: 1,
      stepId: "step_2",
      intent: "change",
      body: "Echo only the first line",
    });
    const keep = await call(person, "plan.comment", {
      planId,
      version: 1,
      stepId: "step_1",
      body: "Is the README the right file?",
    });
    // Agents comment but do not decide when the planner is asked again.
    await expect(call(agent, "plan.revise_from_comments", { planId, version: 1 })).rejects.toMatchObject({
      code: "forbidden",
    });

    llm.script({
      json: {
        ...goodPlan,
        steps: [goodPlan.steps[0], { ...goodPlan.steps[1], description: "Echo the README's first line" }],
      },
    });
    const revised = await call(person, "plan.revise_from_comments", { planId, version: 1 });
    expect(revised).toMatchObject({ sentTo: "planner", comments: 2 });
    await settlePlanning(planner);
    const prompt = JSON.stringify(llm.requests.at(-1));
    expect(prompt).toContain(
      `[comment ${String(change.id).slice(0, 8)}] On step_2 — change this: Echo only the first line`,
    );
    expect(prompt).toContain("On step_1 — comment: Is the README the right file?");

    const listed = await threads(planId);
    expect(listed.find((thread) => thread.id === change.id)!.answeredInVersion).toBe(2);
    expect(listed.find((thread) => thread.id === keep.id)!.answeredInVersion).toBeNull();
    // Nothing left to answer but the open question: asking again sends just that one.
    llm.script({ json: goodPlan });
    expect(await call(person, "plan.revise_from_comments", { planId, version: 2 })).toMatchObject({ comments: 1 });
    await settlePlanning(planner);
  });

  it("sends an agent's plan back to the agent with the comments as the requested changes", async () => {
    const entered = await enterPlanMode(harness.app, { reason: "Add a flag", actor: "coder" });
    const submitted = await submitPlan(harness.app, {
      sessionId: entered.planning_session_id,
      actor: "coder",
      summary: "Add the flag",
      steps: [
        { description: "Edit the parser", context_hints: [], relevant_file_paths: ["."], tools: ["edit"], risk: "low" },
      ],
      questions: [],
    });
    await call(person, "plan.comment", {
      planId: submitted.plan_id,
      version: submitted.version,
      stepId: "step_1",
      intent: "insert_after",
      body: "Add a test for the flag",
    });
    expect(
      await call(person, "plan.revise_from_comments", { planId: submitted.plan_id, version: submitted.version }),
    ).toMatchObject({ sentTo: "agent", sessionId: null, comments: 1 });
    const status = await call(agent, "plan.review_status", { planId: submitted.plan_id });
    expect(JSON.stringify(status)).toContain("insert a step after this one: Add a test for the flag");
  });

  it("accepts a plan in seed 002's own shape, with what the gates find shown as advice", async () => {
    const entered = await enterPlanMode(harness.app, { reason: "Plan the flag", actor: "coder" });
    // Exactly seed 002's format: summary, steps of {description, tools, risk}, questions, notes —
    // no hints and no file paths, and a step that creates a file that does not exist yet.
    const submitted = await submitPlan(harness.app, {
      sessionId: entered.planning_session_id,
      actor: "coder",
      ...submitPlanInput.parse({
        summary: "Add a --verbose flag",
        steps: [
          { description: "Read the argument parser", tools: ["read_file"], risk: "low" },
          { description: "Create src/verbose.ts with the flag's handling", tools: ["write_file"], risk: "medium" },
        ],
        questions: ["Should --verbose also raise the log level?"],
        context_notes: "The parser lives in src/cli.ts",
      }),
    });
    const view = (await call(person, "plan.view", { planId: submitted.plan_id })) as {
      plan: { steps: { id: string }[]; questions: string[]; advice?: { stepId?: string; message: string }[] };
      issues: unknown[];
    };
    expect(view.plan.steps.map((step) => step.id)).toEqual(["step_1", "step_2"]);
    expect(view.plan.questions).toEqual(["Should --verbose also raise the log level?"]);
    expect(view.issues).toEqual([]);
    expect(view.plan.advice?.map((item) => item.stepId)).toEqual(["step_1", "step_2"]);
    expect(view.plan.advice?.[0]?.message).toContain("relevant_file_paths");
  });

  it("keeps the ids of the steps an agent's resubmission left alone, so their comments stay open", async () => {
    const entered = await enterPlanMode(harness.app, { reason: "Three steps", actor: "coder" });
    const steps = [
      { description: "Read the argument parser in README.md", relevant_file_paths: ["README.md"] },
      { description: "Add the verbose flag to the parser", relevant_file_paths: ["README.md"] },
      { description: "Document the flag in the README", relevant_file_paths: ["README.md"] },
    ];
    const first = await submitPlan(harness.app, {
      sessionId: entered.planning_session_id,
      actor: "coder",
      ...submitPlanInput.parse({ summary: "Verbose flag", steps }),
    });
    const onFirst = await call(person, "plan.comment", {
      planId: first.plan_id,
      version: first.version,
      stepId: "step_1",
      intent: "comment",
      body: "Good start",
    });
    const onSecond = await call(person, "plan.comment", {
      planId: first.plan_id,
      version: first.version,
      stepId: "step_2",
      intent: "change",
      body: "Call it --loud instead",
    });
    await call(person, "plan.revise_from_comments", { planId: first.plan_id, version: first.version });
    const second = await submitPlan(harness.app, {
      sessionId: entered.planning_session_id,
      actor: "coder",
      ...submitPlanInput.parse({
        summary: "Loud flag",
        steps: [steps[0], { ...steps[1], description: "Add the loud flag to the parser" }, steps[2]],
      }),
    });
    expect(second.version).toBe(2);
    const revised = (await call(person, "plan.view", { planId: first.plan_id })) as {
      plan: { steps: { id: string }[] };
    };
    expect(revised.plan.steps.map((step) => step.id)).toEqual(["step_1", "step_2", "step_3"]);
    const diff = (await call(person, "plan.diff", { planId: first.plan_id, from: 1, to: 2 })) as {
      added: unknown[];
      removed: unknown[];
      changed: { id: string }[];
    };
    expect(diff.added).toEqual([]);
    expect(diff.removed).toEqual([]);
    expect(diff.changed.map((change) => change.id)).toEqual(["step_2"]);
    const listed = await threads(first.plan_id);
    expect(listed.find((thread) => thread.id === onFirst.id)!.answeredInVersion).toBeNull();
    expect(listed.find((thread) => thread.id === onSecond.id)!.answeredInVersion).toBe(2);
  });

  it("says so when no comment waits for an answer", async () => {
    const plan = await manualPlan("Nothing to revise");
    await expect(call(person, "plan.revise_from_comments", { planId: plan.id, version: 1 })).rejects.toMatchObject({
      code: "invalid_state",
    });
  });
});
