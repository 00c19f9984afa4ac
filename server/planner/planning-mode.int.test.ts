import fs from "node:fs/promises";
import path from "node:path";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { goodPlan } from "../../tests/planner-fixtures";
import { startScriptedLlm, type ScriptedLlm } from "../../tests/scripted-llm";
import { enterPlanMode, submitPlan, submitPlanInput } from "../agents/plan-mode";
import { readEvents } from "../events/store";
import { builtinRegistry } from "../tools/registry";
import { sandboxAvailable } from "../tools/sandbox";
import { readPlannerConfig } from "./config";
import { createPlannerDeps, installPlanner, type PlannerDeps } from "./deps";
import { gatheringTools } from "./deep-mode";
import { settlePlanning } from "./sessions";

/**
 * Seed 002's named tests that apply to the built-in planner, end to end: the `/plan` command
 * (planning.command) starts deep planning on the in-process worker, the scripted model drives
 * the loop, and the assertions read what the model was offered and what it got back.
 */
let harness: Harness;
let llm: ScriptedLlm;
let planner: PlannerDeps;

function configure(overrides: { answerTimeoutMs?: number } = {}) {
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
    overrides,
  );
  installPlanner(harness.app, planner);
}

beforeAll(async () => {
  harness = await startHarness();
  llm = await startScriptedLlm();
  await fs.writeFile(path.join(harness.workspace, "README.md"), "# Demo\nA demo project.\n");
});
afterAll(async () => {
  await llm?.close();
  await harness?.close();
});
beforeEach(() => {
  llm.reset();
  configure();
});
afterEach(async () => {
  // Each test ends with no session open in the default workspace, so `/plan` starts afresh.
  const open = await harness.app.db.prisma.planningSession.findMany({
    where: { status: { in: ["running", "awaiting_answer"] } },
  });
  for (const session of open) await harness.caller.planner.cancel({ sessionId: session.id }).catch(() => undefined);
  await settlePlanning(planner);
});

const command = (text: string, sessionId?: string) =>
  harness.caller.planner.command({ command: text, ...(sessionId && { sessionId }) });
const session = (sessionId: string) => harness.caller.planner.session({ sessionId });
const toolNames = (index: number) => llm.requests[index]!.tools!.map((tool) => tool.function.name).sort();

/** The JSON the loop sent back to the model for the tool call with this id. */
function toolResult(requestIndex: number, toolCallIdPrefix = ""): string {
  const message = llm.requests[requestIndex]!.messages.find(
    (entry) => entry.role === "tool" && (entry.tool_call_id ?? "").startsWith(toolCallIdPrefix),
  );
  return typeof message?.content === "string" ? message.content : JSON.stringify(message?.content ?? null);
}

async function waitFor(sessionId: string, status: string) {
  await expect.poll(async () => (await session(sessionId)).status, { timeout: 60_000 }).toBe(status);
  return session(sessionId);
}

describe("seed 002 planning mode (built-in planner)", () => {
  it("a person's message while the planner gathers joins its next model call", async () => {
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    llm.script(
      async () => {
        await held;
        return { toolCalls: [{ name: "list_dir", arguments: { path: "." } }] };
      },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const started = await command("/plan Show the README");
    const sessionId = started.sessionId!;
    await expect.poll(() => llm.requests.length, { timeout: 60_000 }).toBe(1);
    await harness.caller.planner.message({ sessionId, message: "Also mention the licence" });
    expect((await session(sessionId)).messages[0]).toMatchObject({ deliveredAt: null });
    release();
    const done = await waitFor(sessionId, "completed");
    expect(JSON.stringify(llm.requests[0]!.messages)).not.toContain("Also mention the licence");
    expect(JSON.stringify(llm.requests[1]!.messages)).toContain("Also mention the licence");
    expect(done.messages[0]!.deliveredAt).not.toBeNull();
    const status = await command("/plan status", sessionId);
    expect(status.message).toContain("plan submitted");
  });

  it("test_plan_command_enters_mode / test_plan_command_with_task: /plan <task> starts deep planning of that task", async () => {
    llm.script({ toolCalls: [{ name: "submit_plan", arguments: goodPlan }] });
    const started = await command("/plan   Show the README  ");
    expect(started).toMatchObject({ action: "started", status: "running" });
    expect(started.message).toContain("Show the README");
    const view = await session(started.sessionId!);
    expect(view).toMatchObject({ mode: "deep", goal: "Show the README", kind: "create" });
    expect((await waitFor(started.sessionId!, "completed")).planId).toBeTruthy();
  });

  it("test_enter_planning_mode_restricts_tools: the model is offered only read tools, ask_user and submit_plan", async () => {
    llm.script({ toolCalls: [{ name: "submit_plan", arguments: goodPlan }] });
    const { sessionId } = await command("/plan Show the README");
    await waitFor(sessionId!, "completed");
    const offered = toolNames(0);
    const readTools = gatheringTools(builtinRegistry.list()).map((tool) => tool.name);
    expect(offered).toEqual([...readTools, "ask_user", "submit_plan"].sort());
    for (const name of offered.filter((name) => name !== "ask_user" && name !== "submit_plan")) {
      expect(
        builtinRegistry.get(name) ?? gatheringTools(builtinRegistry.list()).find((t) => t.name === name),
      ).toMatchObject({ readOnly: true, destructive: false });
    }
    for (const blocked of ["write_file", "edit_file", "delete_path", "shell", "git_status", "git_diff", "git_commit"]) {
      expect(offered).not.toContain(blocked);
    }
  });

  it.runIf(sandboxAvailable())(
    "test_bash_read_only_allowed_in_planning: read-only bash runs in the sandbox and its output goes back",
    async () => {
      llm.script(
        { toolCalls: [{ name: "shell_read", arguments: { command: "cat README.md | wc -l" } }] },
        { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
      );
      const { sessionId } = await command("/plan Count the README's lines");
      await waitFor(sessionId!, "completed");
      expect(toolNames(0)).toContain("shell_read");
      expect(toolResult(1)).toMatch(/"exitCode":0/);
      expect(toolResult(1)).toContain("2");
    },
  );

  it.runIf(sandboxAvailable())(
    "test_bash_write_blocked_in_planning: a writing command is refused with the reason and changes nothing",
    async () => {
      llm.script(
        { toolCalls: [{ name: "shell_read", arguments: { command: "echo gone > README.md" } }] },
        { toolCalls: [{ name: "shell_read", arguments: { command: "rm README.md" } }] },
        { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
      );
      const { sessionId } = await command("/plan Tidy the README");
      await waitFor(sessionId!, "completed");
      expect(toolResult(1)).toContain("Blocked while planning");
      expect(toolResult(2)).toContain("Blocked while planning");
      expect(await fs.readFile(path.join(harness.workspace, "README.md"), "utf8")).toBe("# Demo\nA demo project.\n");
    },
  );

  it("test_bash_read_only_allowed_in_planning (no sandbox): without bubblewrap no shell is offered, and a call to one runs nothing", async () => {
    process.env.STEPWISE_SANDBOX = "off";
    try {
      llm.script(
        { toolCalls: [{ name: "shell_read", arguments: { command: "cat README.md" } }] },
        { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
      );
      const { sessionId } = await command("/plan Show the README");
      await waitFor(sessionId!, "completed");
      expect(toolNames(0)).not.toContain("shell_read");
      expect(toolNames(0)).not.toContain("shell");
      // The AI SDK answers a call of a tool that was not offered itself; nothing runs.
      expect(toolResult(1)).toContain("unavailable tool");
      expect(toolResult(1)).not.toContain("A demo project.");
    } finally {
      delete process.env.STEPWISE_SANDBOX;
    }
  });

  it("test_git_tools_blocked_in_planning: git tools are not offered, and a call to one runs nothing", async () => {
    llm.script(
      { toolCalls: [{ name: "git_commit", arguments: { message: "sneaky" } }] },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await command("/plan Commit the README");
    await waitFor(sessionId!, "completed");
    expect(toolNames(0).filter((name) => name.startsWith("git_"))).toEqual([]);
    expect(toolResult(1)).toContain("unavailable tool");
    const events = await readEvents(harness.app.db.pool, sessionId!, 0);
    expect(events.filter((event) => event.type === "planning.tool_call")).toEqual([]);
  });

  it("test_ask_user_allowed_in_planning / test_plan_status_shows_current_state: the question parks the session, /plan status says so", async () => {
    llm.script(
      { toolCalls: [{ name: "ask_user", arguments: { question: "Which file matters most?" } }] },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await command("/plan Show the README");
    const waiting = await waitFor(sessionId!, "awaiting_answer");
    expect(toolNames(0)).toContain("ask_user");
    const status = await command("/plan status");
    expect(status).toMatchObject({ action: "status", sessionId, status: "awaiting_answer" });
    expect(status.message).toContain("waiting for you — Which file matters most?");
    // The session page names its session.
    expect((await command("/plan status", sessionId!)).message).toBe(status.message);
    await harness.caller.planner.answer({
      sessionId: sessionId!,
      questionId: waiting.questions[0]!.id,
      answer: "README",
    });
    await waitFor(sessionId!, "completed");
    expect(toolResult(1)).toContain('"answer":"README"');
    expect((await command("/plan status", sessionId!)).message).toContain("plan submitted and saved");
  });

  it("test_plan_status_shows_current_state: gathering, while the model works", async () => {
    llm.script({ hang: true });
    const { sessionId } = await command("/plan Show the README");
    await expect.poll(() => llm.requests.length).toBe(1);
    const status = await command("/plan status");
    expect(status).toMatchObject({ sessionId, status: "running", phase: "gathering" });
    expect(status.message).toContain("gathering context");
  });

  it("test_plan_already_active_is_noop: a second /plan answers the status and starts nothing", async () => {
    llm.script({ hang: true });
    const first = await command("/plan Show the README");
    await expect.poll(() => llm.requests.length).toBe(1);
    const second = await command("/plan Something else entirely");
    expect(second).toMatchObject({ action: "status", sessionId: first.sessionId, status: "running" });
    expect(second.message).toMatch(/^Already planning\. Planning “Show the README”/);
    expect(await harness.app.db.prisma.planningSession.count({ where: { goal: "Something else entirely" } })).toBe(0);
  });

  it("test_plan_cancel_exits_mode: /plan cancel ends the session, stops its loop and audits it", async () => {
    llm.script({ hang: true });
    const { sessionId } = await command("/plan Show the README");
    await expect.poll(() => llm.requests.length).toBe(1);
    const cancelled = await command("/plan cancel");
    expect(cancelled).toMatchObject({ action: "cancelled", sessionId, status: "cancelled" });
    await settlePlanning(planner);
    expect(planner.background.size).toBe(0); // the hung model call was aborted
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { action: "planning.cancelled" } });
    expect(audit.map((entry) => entry.detail)).toContainEqual(expect.objectContaining({ sessionId }));
    // Nothing is open any more; a new /plan starts a new session.
    await expect(command("/plan cancel")).rejects.toMatchObject({ code: "PRECONDITION_FAILED" });
  });

  it("refuses an unknown command with the three it knows, and /plan without a task", async () => {
    for (const bad of ["/plans now", "plan status", "/status", ""]) {
      await expect(command(bad)).rejects.toMatchObject({
        code: "BAD_REQUEST",
        message: expect.stringContaining("/plan [task], /plan status, /plan cancel"),
      });
    }
    await expect(command("/plan")).rejects.toMatchObject({ message: expect.stringContaining("Say what to plan") });
    expect(llm.requests).toHaveLength(0);
  });

  it("test_submit_plan_validates_structure: a submission that is not a plan goes back to the model as an invalid call", async () => {
    llm.script(
      { toolCalls: [{ name: "submit_plan", arguments: { summary: 42, steps: "none" } }] },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await command("/plan Show the README");
    const done = await waitFor(sessionId!, "completed");
    expect(toolResult(1)).toContain("Invalid input for tool submit_plan");
    const plan = await harness.caller.plans.get({ planId: done.planId! });
    expect(plan.plan.summary).toBe(goodPlan.summary);
  });

  it("test_submit_plan_persisted_to_db: the accepted plan and the session's record of it are stored", async () => {
    llm.script({ toolCalls: [{ name: "submit_plan", arguments: goodPlan }] });
    const { sessionId } = await command("/plan Show the README");
    const done = await waitFor(sessionId!, "completed");
    expect(done).toMatchObject({ phase: "done", resultVersion: 1 });
    const row = await harness.app.db.prisma.planVersion.findFirstOrThrow({ where: { planId: done.planId! } });
    expect(row).toMatchObject({ summary: goodPlan.summary, contextNotes: goodPlan.contextNotes, source: "llm" });
    const stored = await harness.app.db.prisma.planningSession.findUniqueOrThrow({ where: { id: sessionId! } });
    expect((stored.loopState as { accepted?: { draft: { summary: string } } }).accepted?.draft.summary).toBe(
      goodPlan.summary,
    );
  });

  it("test_plan_timeout_cancels_mode: an unanswered question cancels the session after the configured time", async () => {
    configure({ answerTimeoutMs: 300 });
    llm.script({ toolCalls: [{ name: "ask_user", arguments: { question: "Anyone?" } }] });
    const { sessionId } = await command("/plan Show the README");
    await waitFor(sessionId!, "cancelled");
    const status = await command("/plan status", sessionId!);
    expect(status.message).toContain("cancelled — Nobody answered the planner's question in time");
    const events = (await readEvents(harness.app.db.pool, sessionId!, 0)).map((event) => event.type);
    expect(events).toContain("planning.timed_out");
    const audit = await harness.app.db.prisma.auditEntry.findMany({ where: { action: "planning.timed_out" } });
    expect(audit.map((entry) => entry.detail)).toContainEqual(expect.objectContaining({ sessionId }));
  });

  it("a turn that parks on a question resumes mid-turn: the result recorded before it is reused, not recomputed", async () => {
    llm.script(
      {
        toolCalls: [
          { name: "read_file", arguments: { path: "README.md" } },
          { name: "ask_user", arguments: { question: "Echo it too?" } },
        ],
      },
      { toolCalls: [{ name: "submit_plan", arguments: goodPlan }] },
    );
    const { sessionId } = await command("/plan Show the README");
    const waiting = await waitFor(sessionId!, "awaiting_answer");
    // The loop ended its job while parked; the read_file result is saved in the session row.
    expect(planner.background.size).toBe(0);
    await harness.caller.planner.answer({ sessionId: sessionId!, questionId: waiting.questions[0]!.id, answer: "Yes" });
    await waitFor(sessionId!, "completed");
    const events = (await readEvents(harness.app.db.pool, sessionId!, 0)).map((event) => event.type);
    expect(events.filter((type) => type === "planning.tool_call")).toHaveLength(1);
    const results = llm.requests[1]!.messages.filter((message) => message.role === "tool");
    expect(results).toHaveLength(2);
    const contents = results.map((message) => String(message.content)).join("\n");
    expect(contents).toContain("A demo project.");
    expect(contents).toContain('"answer":"Yes"');
  });
});

describe("/plan status on an agent's own planning session", () => {
  it("says gathering, then waiting for review, then executing — never queued or done early", async () => {
    const entered = await enterPlanMode(harness.app, { reason: "Plan before touching the parser", actor: "coder" });
    const sessionId = entered.planning_session_id;
    const gathering = await command("/plan status", sessionId);
    expect(gathering).toMatchObject({ status: "running", phase: "gathering" });
    expect(gathering.message).toContain("the agent is gathering context");
    expect(gathering.message).not.toContain("waiting for a worker");

    const submitted = await submitPlan(harness.app, {
      sessionId,
      actor: "coder",
      ...submitPlanInput.parse({ summary: "One task", steps: [{ description: "Read the README" }] }),
    });
    const review = await command("/plan status", sessionId);
    expect(review).toMatchObject({ status: "completed", phase: "waiting_for_review" });
    expect(review.message).toContain("is waiting for your review");

    await harness.caller.plans.approve({ planId: submitted.plan_id, version: submitted.version });
    const executing = await command("/plan status", sessionId);
    expect(executing.phase).toBe("executing");
    expect(executing.message).toContain("executing the approved plan");
  });
});
