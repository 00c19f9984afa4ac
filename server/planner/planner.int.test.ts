import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { cyclicPlanWithUnknownTool, goodPlan, goodStep } from "../../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { readEvents } from "../events/store";
import { readPlannerConfig } from "./config";
import { createPlannerDeps, installPlanner, type PlannerDeps } from "./deps";
import { settlePlanning } from "./sessions";
import { sandboxAvailable } from "../tools/sandbox";

let harness: Harness;
let llm: ScriptedLlm;
let planner: PlannerDeps;

function configure(env: Record<string, string> = {}) {
  planner = createPlannerDeps(
    harness.app,
    readPlannerConfig({
      STEPWISE_LLM_BASE_URL: llm.baseUrl,
      STEPWISE_LLM_MODELS: "scripted-planner",
      STEPWISE_LLM_NAME: "Scripted",
      STEPWISE_PLANNER_RETRIES: "0",
      // Generous: on a busy machine the scripted model in this process can take seconds to answer,
      // and a call cut off by the timeout fails the session. The timeout test sets its own.
      STEPWISE_PLANNER_TIMEOUT_MS: "60000",
      STEPWISE_LLM_PRICES: JSON.stringify({ "scripted-planner": { input: 1, output: 2 } }),
      ...env,
    }),
  );
  installPlanner(harness.app, planner);
}

beforeAll(async () => {
  harness = await startHarness();
  llm = await startScriptedLlm();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\nA demo project.\n");
  await fs.writeFile(path.join(harness.workspace, ".gitignore"), "secret.txt\n");
  await fs.writeFile(path.join(harness.workspace, "secret.txt"), "do not show\n");
  await fs.mkdir(path.join(harness.workspace, "src"));
  await fs.writeFile(path.join(harness.workspace, "src", "app.ts"), "// TODO: handle empty input\nexport {};\n");
});
afterAll(async () => {
  if (planner) await settlePlanning(planner);
  await llm.close();
  await harness.close();
});
beforeEach(() => {
  llm.reset();
  configure();
});

async function finished(sessionId: string) {
  await settlePlanning(planner);
  return harness.caller.planner.session({ sessionId });
}

async function waitForStatus(sessionId: string, status: string) {
  // A backstop only, by the clock rather than a count of polls that a busy machine makes slow.
  const deadline = Date.now() + 60_000;
  for (;;) {
    const session = await harness.caller.planner.session({ sessionId });
    if (session.status === status) return session;
    if (Date.now() > deadline) throw new Error(`session never reached ${status} (it is ${session.status})`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

async function eventTypes(sessionId: string) {
  return (await readEvents(harness.app.db.pool, sessionId, 0)).map((event) => event.type);
}

function userText(request: { messages: { role: string; content?: unknown }[] }) {
  return request.messages
    .filter((message) => message.role === "user" || message.role === "tool")
    .map((message) => (typeof message.content === "string" ? message.content : JSON.stringify(message.content)))
    .join("\n");
}

describe("quick mode", () => {
  it("plans a goal in one structured call with a bounded snapshot and the tool catalogue", async () => {
    llm.script({ json: goodPlan });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("completed");
    const plan = await harness.caller.plans.get({ planId: session.planId! });
    expect(plan.plan).toMatchObject({ source: "llm", model: "compatible:scripted-planner", traceId: session.traceId });
    expect(plan.plan.steps.map((step) => step.id)).toEqual(["step_1", "step_2"]);
    expect(plan.issues).toEqual([]);

    const prompt = userText(llm.requests[0]!);
    expect(prompt).toContain("Show the README");
    expect(prompt).toContain("A demo project."); // key file content
    expect(prompt).toContain("src/app.ts");
    expect(prompt).not.toContain("secret.txt"); // .gitignore honoured
    expect(prompt).toMatch(/- write_file .*destructive/);
    expect(prompt).toContain('"path"'); // tool input schemas
    expect(llm.requests[0]!.response_format).toBeDefined();

    expect(await eventTypes(sessionId)).toEqual([
      "planning.started",
      "planning.context",
      "planning.usage",
      "planning.draft",
      "planning.gates_passed",
      "planning.completed",
    ]);
    const usage = await harness.caller.planner.usage({ planId: session.planId! });
    expect(usage.totals.calls).toBe(1);
    expect(usage.totals.inputTokens).toBeGreaterThan(0);
    expect(usage.totals.costUsd).toBeGreaterThan(0);
    expect(usage.calls[0]).toMatchObject({ purpose: "draft", traceId: session.traceId, ok: true });
    expect(plan.plan.usage).toEqual({ inputTokens: usage.totals.inputTokens, outputTokens: usage.totals.outputTokens });
  });

  it("works the same through the OpenAI provider pointed at the scripted server", async () => {
    configure({
      STEPWISE_LLM_BASE_URL: "",
      OPENAI_API_KEY: "sk-test",
      OPENAI_BASE_URL: llm.baseUrl,
      STEPWISE_LLM_PRICES: "{}",
    });
    llm.script({ json: goodPlan });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session).toMatchObject({ status: "completed", model: "openai:gpt-4.1-mini" });
    expect(llm.requests[0]!.model).toBe("gpt-4.1-mini");
    // gpt-4.1-mini has a known price, so the call has a cost.
    expect(session.usage.costUsd).toBeGreaterThan(0);
  });

  it("sends a draft with a cycle and an unknown tool back with the gate failures, and the refined draft passes", async () => {
    llm.script({ json: cyclicPlanWithUnknownTool }, { json: goodPlan });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("completed");
    expect(llm.requests).toHaveLength(2);
    const critique = userText(llm.requests[1]!);
    expect(critique).toContain("Circular dependency");
    expect(critique).toContain("Unknown tool: teleport_file");
    const events = await readEvents(harness.app.db.pool, sessionId, 0);
    const failed = events.find((event) => event.type === "planning.gates_failed")!;
    expect(failed.data.details).toEqual(
      expect.arrayContaining([
        expect.stringContaining("Circular dependency"),
        expect.stringContaining("Unknown tool: teleport_file. Available tools: "),
      ]),
    );
    expect(events.map((event) => event.type)).toContain("planning.refining");
  });

  it("never accepts a draft that still fails after the refinements: seed 003's plan_validation_failed", async () => {
    const noHints = { ...goodPlan, steps: [goodStep("step_1", { contextHints: [], relevantFilePaths: ["nope.md"] })] };
    llm.script({ json: noHints }, { json: noHints }, { json: noHints });
    const before = await harness.app.db.prisma.plan.count();
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("invalid");
    expect(llm.requests).toHaveLength(3); // draft + 2 refinements (the default bound)
    expect(session.failure).toMatchObject({
      status: "error",
      error_type: "plan_validation_failed",
      message: "The submitted plan is invalid and was rejected. You must fix the plan and resubmit.",
      details: expect.arrayContaining([
        expect.stringContaining("is missing the `context_hints` field"),
        expect.stringContaining("lists a file that does not exist: `nope.md`"),
      ]),
    });
    expect(session.draft).toMatchObject({ goal: "Show the README" });
    expect(session.planId).toBeNull();
    expect(await harness.app.db.prisma.plan.count()).toBe(before);
  });

  it("holds its drafts to the gates every door runs: a title, actionable hints, files that exist, agent tasks' paths", async () => {
    const bad = {
      ...goodPlan,
      steps: [
        goodStep("step_1", { title: undefined }),
        {
          id: "step_2",
          title: "Update the parser",
          description: "Update the parser",
          tool: "agent_task",
          args: {},
          dependsOn: ["step_1"],
          risk: "low",
          type: "chore",
          contextHints: ["stuff", "Read `docs/missing-spec.md` first"],
          relevantFilePaths: [],
        },
      ],
    };
    llm.script({ json: bad }, { json: bad }, { json: bad });
    const before = await harness.app.db.prisma.plan.count();
    const { sessionId } = await harness.caller.planner.start({ goal: "Improve the parser", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("invalid");
    expect((session.failure as { details: string[] }).details.sort()).toEqual(
      [
        "Step 'Read the README to learn what the project is' (step_1) has no `title`: say in a sentence what the step achieves.",
        `Step 'Update the parser' (step_2) has a hint that is not actionable: "stuff". Start it with a verb (Read, Edit, Run…) or point at a file or section.`,
        "Step 'Update the parser' (step_2) has a hint pointing to a non-existent file: `docs/missing-spec.md`.",
        "Step 'Update the parser' (step_2) is missing the `relevant_file_paths` field: list the files the task will read or change.",
      ].sort(),
    );
    expect(await harness.app.db.prisma.plan.count()).toBe(before);
  });

  it("stores a destructive step the model left ungated with its gate raised, without asking again", async () => {
    const ungated = {
      ...goodPlan,
      steps: [
        goodStep("step_1", {
          tool: "write_file",
          args: { path: "out.txt", content: "x" },
          approvalRequired: false,
          relevantFilePaths: ["out.txt"],
        }),
      ],
    };
    llm.script({ json: ungated });
    const { sessionId } = await harness.caller.planner.start({ goal: "Write a file", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("completed");
    expect(llm.requests).toHaveLength(1);
    const { plan } = await harness.caller.plans.get({ planId: session.planId! });
    expect(plan.steps[0]!.approvalRequired).toBe(true);
  });

  it("feeds a judge rejection back to the model and accepts the plan the judge approves", async () => {
    llm.script(
      { json: goodPlan },
      { json: { is_approved: false, feedback: "Add a step that verifies the result." } },
      { json: goodPlan },
      { json: { is_approved: true, feedback: "Looks good." } },
    );
    const { sessionId } = await harness.caller.planner.start({
      goal: "Show the README",
      mode: "quick",
      useJudge: true,
    });
    const session = await finished(sessionId);
    expect(session.status).toBe("completed");
    // The judge's own prompt (seed 003 P-2), answering only {is_approved, feedback}.
    expect(JSON.stringify(llm.requests[1]!.messages)).toContain("senior software engineer");
    expect(JSON.stringify(llm.requests[1]!.messages)).toContain("is_approved");
    expect(userText(llm.requests[2]!)).toContain("Add a step that verifies the result.");
    const events = await readEvents(harness.app.db.pool, sessionId, 0);
    expect(events.filter((event) => event.type === "planning.judge").map((event) => event.data.approved)).toEqual([
      false,
      true,
    ]);
    const usage = await harness.caller.planner.usage({ sessionId });
    expect(usage.calls.map((call) => call.purpose)).toEqual(["draft", "judge", "refine", "judge"]);
  });
});

describe("failures", () => {
  it("turns a provider 500 into a clear, retryable message, and a retry succeeds", async () => {
    llm.script({ status: 500, body: '{"error":{"message":"model crashed"}}' });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("failed");
    expect(session.failure).toMatchObject({ error_type: "provider_error", kind: "provider", retryable: true });
    expect(session.failure!.message).toContain("HTTP 500");
    expect(session.failure!.message).not.toMatch(/at .*\.ts:\d+/); // no stack trace

    llm.script({ json: goodPlan });
    const retried = await harness.caller.planner.retry({ sessionId });
    const again = await finished(retried.sessionId);
    expect(again.status).toBe("completed");
    expect(again.goal).toBe("Show the README");
  });

  it("gives up on a provider that does not answer within the timeout", async () => {
    configure({ STEPWISE_PLANNER_TIMEOUT_MS: "1500" });
    // The model never answers: the session ends at all only because the timeout fired.
    llm.script({ hang: true });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.status).toBe("failed");
    expect(session.failure).toMatchObject({ kind: "timeout", retryable: true });
    expect(session.failure!.message).toContain("did not answer within 2 s");
  });

  it("reports a rate limit as such", async () => {
    llm.script({ status: 429 });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(sessionId);
    expect(session.failure).toMatchObject({ kind: "rate_limit", retryable: true });
    expect(session.failure!.message).toContain("rate limiting");
  });

  it("asks again after unparsable output, and fails clearly when it stays unparsable", async () => {
    llm.script({ text: "Sure! Here is your plan: step one, read." }, { json: goodPlan });
    const first = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    expect((await finished(first.sessionId)).status).toBe("completed");
    expect(userText(llm.requests[1]!)).toContain("could not be read as the plan JSON");

    llm.reset();
    llm.script({ text: "no" }, { text: "still no" }, { text: "never" });
    const second = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    const session = await finished(second.sessionId);
    expect(session.status).toBe("failed");
    expect(session.failure).toMatchObject({ kind: "unparsable", retryable: true });
    expect(session.failure!.message).toContain("did not return a readable plan in 3 attempts");
  });

  it("cancels a running session at once", async () => {
    llm.script({ hang: true });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "quick" });
    while (llm.requests.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await harness.caller.planner.cancel({ sessionId });
    const session = await finished(sessionId);
    expect(session.status).toBe("cancelled");
    expect(await eventTypes(sessionId)).toContain("planning.cancelled");
    await expect(harness.caller.planner.cancel({ sessionId })).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
  });

  it("refuses an empty or oversized goal and stores nothing", async () => {
    const before = await harness.app.db.prisma.planningSession.count();
    await expect(harness.caller.planner.start({ goal: "   ", mode: "quick" })).rejects.toMatchObject({
      code: "BAD_REQUEST",
      message: "The goal is empty",
    });
    await expect(harness.caller.planner.start({ goal: "x".repeat(4_001), mode: "quick" })).rejects.toMatchObject({
      code: "PAYLOAD_TOO_LARGE",
    });
    expect(await harness.app.db.prisma.planningSession.count()).toBe(before);
    expect(llm.requests).toHaveLength(0);
  });

  it("says exactly what to set when no provider is configured", async () => {
    planner = createPlannerDeps(harness.app, readPlannerConfig({}));
    installPlanner(harness.app, planner);
    const options = await harness.caller.planner.options();
    expect(options.config.configured).toBe(false);
    expect(options.config.help.map((item) => item.variable)).toEqual([
      "OPENAI_API_KEY",
      "ANTHROPIC_API_KEY",
      "STEPWISE_LLM_BASE_URL",
    ]);
    await expect(harness.caller.planner.start({ goal: "Plan", mode: "quick" })).rejects.toMatchObject({
      code: "PRECONDITION_FAILED",
      message: expect.stringContaining("Set OPENAI_API_KEY, or ANTHROPIC_API_KEY, or STEPWISE_LLM_BASE_URL"),
    });
  });

  it("never shows keys in the configuration", async () => {
    configure({ STEPWISE_LLM_API_KEY: "sk-very-secret", OPENAI_API_KEY: "sk-openai-secret" });
    const options = await harness.caller.planner.options();
    expect(JSON.stringify(options)).not.toContain("secret");
    expect(options.config.providers.map((provider) => [provider.kind, provider.keySet])).toEqual([
      ["openai", true],
      ["compatible", true],
    ]);
  });
});

describe("deep mode", () => {
  it("gathers context with a read-only tool, asks the person, and submits a plan", async () => {
    llm.script(
      { toolCalls: [{ name: "list_dir", arguments: { path: "." } }] },
      { toolCalls: [{ name: "ask_user", arguments: { question: "Which file matters most?" } }] },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    const waiting = await waitForStatus(sessionId, "awaiting_answer");
    expect(waiting.questions).toEqual([
      expect.objectContaining({ question: "Which file matters most?", answer: null }),
    ]);
    // Only read-only tools, ask_user and submit_plan are offered.
    const offered = llm.requests[0]!.tools!.map((tool) => tool.function.name).sort();
    expect(offered).toContain("list_dir");
    expect(offered).toContain("submit_plan");
    expect(offered).toContain("ask_user");
    expect(offered).not.toContain("write_file");
    expect(offered).not.toContain("delete_path");
    // Seed 002: git tools are blocked while planning; read-only bash runs in the sandbox.
    expect(offered).not.toContain("git_status");
    expect(offered.includes("shell_read")).toBe(sandboxAvailable());
    expect(JSON.stringify(llm.requests[1]!.messages)).toContain("README.md"); // list_dir's result went back

    await harness.caller.planner.answer({
      sessionId,
      questionId: waiting.questions[0]!.id,
      answer: "The README",
    });
    const session = await finished(sessionId);
    expect(session.status).toBe("completed");
    expect(JSON.stringify(llm.requests[2]!.messages)).toContain("The README");
    const plan = await harness.caller.plans.get({ planId: session.planId! });
    expect(plan.plan).toMatchObject({ summary: goodPlan.summary, contextNotes: goodPlan.contextNotes });
    const types = await eventTypes(sessionId);
    expect(types).toEqual(
      expect.arrayContaining(["planning.tool_call", "planning.question", "planning.answered", "planning.completed"]),
    );
  });

  it("returns a rejected submission to the model with the gate failures", async () => {
    llm.script({ toolCalls: [{ name: "submit_plan", arguments: cyclicPlanWithUnknownTool }] }, (request) => {
      expect(JSON.stringify(request.messages)).toContain("plan_validation_failed");
      return { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] };
    });
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    expect((await finished(sessionId)).status).toBe("completed");
  });

  it("stops at the step bound", async () => {
    configure({ STEPWISE_PLANNER_MAX_STEPS: "2" });
    llm.script(
      { toolCalls: [{ name: "list_dir", arguments: { path: "." } }] },
      { toolCalls: [{ name: "read_file", arguments: { path: "README.md" } }] },
    );
    const { sessionId } = await harness.caller.planner.start({ goal: "Show the README", mode: "deep" });
    const session = await finished(sessionId);
    expect(session.status).toBe("failed");
    expect(session.failure!.message).toContain("used all 2 tool calls");
  });
});

describe("regenerate and suggest", () => {
  it("regenerates with feedback into a new version that needs its own approval", async () => {
    llm.script({ json: goodPlan });
    const first = await finished(
      (await harness.caller.planner.start({ goal: "Show the README", mode: "quick" })).sessionId,
    );
    const planId = first.planId!;
    const revised = {
      ...goodPlan,
      steps: [goodPlan.steps[0], { ...goodStep("new_check"), title: "Read it again to verify" }],
    };
    llm.script({ json: revised });
    const { sessionId } = await harness.caller.planner.regenerate({
      planId,
      baseVersion: 1,
      feedback: "Replace the echo with a verification read",
    });
    const session = await finished(sessionId);
    expect(session).toMatchObject({ status: "completed", kind: "regenerate", planId, resultVersion: 2 });
    expect(userText(llm.requests[1]!)).toContain("Replace the echo with a verification read");
    expect(userText(llm.requests[1]!)).toContain('"id": "step_2"'); // the current version went along
    const v2 = await harness.caller.plans.get({ planId });
    expect(v2.plan.version).toBe(2);
    // The model's new step gets a fresh id; step_2 (removed) is never reused.
    expect(v2.plan.steps.map((step) => step.id)).toEqual(["step_1", "step_3"]);
    // Approving version 1 runs version 1: the new version waits for its own review.
    const { runId } = await harness.caller.plans.approve({ planId, version: 1 });
    const run = await harness.waitForRun(runId);
    expect(run.planVersion).toBe(1);
    // Stale feedback on an old version is refused.
    await expect(
      harness.caller.planner.regenerate({ planId, baseVersion: 1, feedback: "again" }),
    ).rejects.toMatchObject({ code: "CONFLICT" });
  });

  it("keeps the ids of the steps a regenerated draft kept under other names", async () => {
    llm.script({ json: goodPlan });
    const first = await finished(
      (await harness.caller.planner.start({ goal: "Show the README", mode: "quick" })).sessionId,
    );
    const planId = first.planId!;
    // The model hands back the same two steps named a and b, the second one reworded.
    const [read, echo] = goodPlan.steps;
    llm.script({
      json: {
        ...goodPlan,
        steps: [
          { ...read, id: "a" },
          {
            ...echo,
            id: "b",
            description: "Echo the README's text so the run shows it all",
            dependsOn: ["a"],
            args: { value: "$a" },
          },
        ],
      },
    });
    const { sessionId } = await harness.caller.planner.regenerate({ planId, baseVersion: 1, feedback: "Say all" });
    expect(await finished(sessionId)).toMatchObject({ status: "completed", resultVersion: 2 });
    const v2 = await harness.caller.plans.get({ planId });
    expect(v2.plan.steps.map((step) => [step.id, step.dependsOn, step.args])).toEqual([
      ["step_1", [], read!.args],
      ["step_2", ["step_1"], { value: "$step_1" }],
    ]);
  });

  it("suggests steps from TODO markers and adds the chosen one as a new version", async () => {
    llm.script({ json: goodPlan });
    const made = await finished(
      (await harness.caller.planner.start({ goal: "Show the README", mode: "quick" })).sessionId,
    );
    llm.script((request) => {
      expect(userText(request)).toContain("src/app.ts:1 TODO: handle empty input");
      return {
        json: {
          suggestions: [
            {
              reason: "TODO in src/app.ts:1: handle empty input",
              step: goodStep("step_9", {
                title: "Read src/app.ts",
                args: { path: "src/app.ts" },
                relevantFilePaths: ["src/app.ts"],
              }),
            },
          ],
        },
      };
    });
    const { suggestions, todos } = await harness.caller.planner.suggest({ planId: made.planId! });
    expect(todos).toBe(1);
    expect(suggestions).toHaveLength(1);
    expect(suggestions[0]!.issues).toEqual([]);
    const v2 = await harness.caller.planner.addSuggestion({
      planId: made.planId!,
      baseVersion: 1,
      step: suggestions[0]!.step,
    });
    expect(v2.version).toBe(2);
    expect(v2.steps.map((step) => step.id)).toEqual(["step_1", "step_2", "step_3"]);
    expect(v2.steps[2]!.args).toEqual({ path: "src/app.ts" });
  });
});

describe("recovery", () => {
  async function failedRun() {
    const created = await harness.caller.plans.createFromJson({
      planJson: JSON.stringify({
        goal: "Read the config",
        steps: [{ id: "step_1", description: "Read the config", tool: "read_file", args: { path: "config.json" } }],
      }),
    });
    const { runId } = await harness.caller.plans.approve({ planId: created.id, version: 1 });
    const run = await harness.waitForRun(runId, ["failed", "completed"]);
    expect(run.steps[0]!.status).toBe("failed");
    return { planId: created.id, runId };
  }

  it("proposes a retry with new arguments that, accepted, the engine applies and records", async () => {
    const { planId, runId } = await failedRun();
    llm.script((request) => {
      expect(userText(request)).toContain("config.json");
      expect(userText(request)).toMatch(/ENOENT|no such file/i);
      return {
        json: {
          reasoning: "config.json does not exist; the README does.",
          action: { kind: "retry", args: { path: "README.md" } },
        },
      };
    });
    const proposal = await harness.caller.planner.proposeRecovery({ runId, stepId: "step_1" });
    expect(proposal).toMatchObject({ status: "proposed", action: { kind: "retry", args: { path: "README.md" } } });
    expect(proposal.reasoning).toContain("does not exist");
    const accepted = await harness.caller.planner.decideRecovery({ proposalId: proposal.id, accept: true });
    expect(accepted).toMatchObject({ status: "accepted", decidedBy: "tester" });
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps[0]!.result?.value).toContain("A demo project.");
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { runId }, orderBy: { id: "asc" } });
    expect(audit.map((entry) => entry.action)).toEqual(
      expect.arrayContaining(["recovery.proposed", "recovery.accepted"]),
    );
    const runUsage = await harness.caller.planner.usage({ runId });
    expect(runUsage.calls.map((call) => call.purpose)).toEqual(["recovery"]);
    await expect(
      harness.caller.planner.decideRecovery({ proposalId: proposal.id, accept: false }),
    ).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
    void planId;
  });

  it("records a rejection and changes nothing in the run; an invalid action goes back to the model once", async () => {
    const { runId } = await failedRun();
    llm.script(
      { json: { reasoning: "Try another tool", action: { kind: "retry", args: { nope: 1 } } } },
      { json: { reasoning: "Skipping is safe: nothing depends on it.", action: { kind: "skip" } } },
    );
    const proposal = await harness.caller.planner.proposeRecovery({ runId, stepId: "step_1" });
    expect(proposal.action).toEqual({ kind: "skip" });
    expect(userText(llm.requests[1]!)).toContain("args");
    const rejected = await harness.caller.planner.decideRecovery({ proposalId: proposal.id, accept: false });
    expect(rejected.status).toBe("rejected");
    const run = await harness.caller.runs.get({ runId });
    expect(run.steps[0]!.status).toBe("failed");
    const proposals = await harness.caller.planner.recoveryProposals({ runId });
    expect(proposals.map((p) => p.status)).toEqual(["rejected"]);
  });
});
