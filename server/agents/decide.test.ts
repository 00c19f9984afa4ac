import { describe, expect, it } from "vitest";
import type { AgentTaskView } from "./contract";
import { decideNow, type SessionState } from "./decide";
import type { OpenSignal } from "./signal-store";

/** Which `now.reason` for which state: seed 003's status decision, case by case. */
function task(id: number, state: string, executor: "agent" | "stepwise" = "agent"): AgentTaskView {
  return {
    id,
    title: `Task ${id}`,
    status: "TODO",
    dependencies: [],
    context_hints: [],
    relevant_file_paths: [],
    executor,
    state,
  };
}

function signal(level: OpenSignal["level"], id = "s"): OpenSignal {
  return { id, task_id: 2, level, message: `${level} message`, raised_by: "agent", raised_at: "" };
}

function state(overrides: Partial<SessionState> = {}): SessionState {
  return {
    session: { id: "s-1", goal: "Goal", finalSummary: null },
    instructions: { content: "# rules", delivered: true },
    signals: [],
    tasks: [task(1, "completed"), task(2, "awaiting_agent"), task(3, "pending")],
    runStatus: "running",
    ...overrides,
  };
}

describe("decideNow", () => {
  it("with several agents, gives the agent its assigned task and brief, or says why it waits", () => {
    const brief = {
      task_id: 3,
      title: "Task 3",
      goal: "Goal",
      context_hints: [],
      relevant_file_paths: [],
      acceptance: ["It works"],
      dependency_notes: [],
      approver_notes: [],
      working_directory: "/ws",
      assignee: "bob",
      lease_expires_at: "2026-01-01T00:00:00.000Z",
    };
    const tasks = [task(1, "completed"), task(2, "awaiting_agent"), task(3, "awaiting_agent")];
    const mine = decideNow(state({ tasks, assignment: { taskId: 3, brief } }));
    expect(mine.now).toMatchObject({ reason: "ready_for_task", current_task: { id: 3 }, brief });

    const capped = decideNow(state({ tasks, assignment: { taskId: null, capReached: true, cap: 1 } }));
    expect(capped.now).toMatchObject({ reason: "waiting", retry_after_seconds: 5 });
    expect(capped.now.reason === "waiting" && capped.now.message).toBe(
      "1 agent task is in progress, this session's cap; a task is handed out when one of them is done.",
    );
    const held = decideNow(state({ tasks, assignment: { taskId: null, capReached: false, cap: 3 } }));
    expect(held.now.reason === "waiting" && held.now.message).toContain("Other agents hold every ready task");
  });

  it("hands the approvers' notes over with the task, and says to follow them; none, no field", () => {
    const notes = [{ about: "plan", by: "alice", note: "Back the file up first." }];
    const ready = decideNow(state({ approverNotes: notes }));
    expect(ready.now).toMatchObject({ reason: "ready_for_task", approver_notes: notes });
    expect(ready.now.agent_instructions).toContain("`approver_notes`");
    expect(decideNow(state({ approverNotes: [] })).now).not.toHaveProperty("approver_notes");
    expect(decideNow(state()).now.agent_instructions).not.toContain("approver_notes");
  });

  it("syncs instructions first, before anything else — even an open blocker", () => {
    const now = decideNow(
      state({ instructions: { content: "# rules", delivered: false }, signals: [signal("blocker")] }),
    );
    expect(now).toMatchObject({ now: { reason: "sync_instructions", instructions_content: "# rules" } });
    expect(now.session).toEqual({ id: "s-1", goal: "Goal" });
  });

  it("an open blocker holds the agent; warnings and info do not", () => {
    expect(decideNow(state({ signals: [signal("warning"), signal("info")] })).now.reason).toBe("ready_for_task");
    const held = decideNow(state({ signals: [signal("warning"), signal("blocker", "tests")] }));
    expect(held).toMatchObject({
      now: { reason: "waiting_on_signal", message: "Waiting for signal 'tests' on task 2 to be cleared." },
      signal: { id: "tests", task_id: 2, level: "blocker", message: "blocker message" },
      session: { id: "s-1" },
    });
  });

  it("hands out the task in progress before any new one, then the first waiting task in plan order", () => {
    const inProgress = decideNow(state({ tasks: [task(1, "awaiting_agent"), task(2, "running")] }));
    expect(inProgress).toMatchObject({ now: { reason: "ready_for_task", current_task: { id: 2 } } });
    const next = decideNow(
      state({
        tasks: [task(1, "completed"), task(2, "pending"), task(3, "awaiting_agent"), task(4, "awaiting_agent")],
      }),
    );
    expect(next).toMatchObject({
      now: { reason: "ready_for_task", current_task: { id: 3 } },
      plan: { tasks: expect.any(Array) },
    });
  });

  it("never hands out a step Stepwise runs itself", () => {
    const now = decideNow(state({ tasks: [task(1, "completed"), task(2, "running", "stepwise")] }));
    expect(now).toMatchObject({ now: { reason: "waiting", waiting_for: [{ task_id: 2, state: "running" }] } });
  });

  it("waits, saying why, for approvals, a person's pause, and failed steps", () => {
    const approval = decideNow(state({ tasks: [task(1, "completed"), task(2, "awaiting_approval")] }));
    expect(approval).toMatchObject({
      now: { reason: "waiting", message: "Waiting for a person to approve a step.", retry_after_seconds: 30 },
    });
    const paused = decideNow(state({ runStatus: "paused" }));
    expect(paused).toMatchObject({ now: { reason: "waiting", message: expect.stringContaining("paused") } });
    // A paused run still lets the agent finish the task it holds.
    expect(decideNow(state({ runStatus: "paused", tasks: [task(1, "running")] })).now.reason).toBe("ready_for_task");
    const failed = decideNow(state({ tasks: [task(1, "failed", "stepwise"), task(2, "blocked")] }));
    expect(failed).toMatchObject({ now: { reason: "waiting", message: expect.stringContaining("failed") } });
  });

  it("completes when every task is settled, asks for the summary once, then says the session is done", () => {
    const done = [task(1, "completed"), task(2, "skipped"), task(3, "cancelled")];
    expect(decideNow(state({ tasks: done }))).toMatchObject({
      now: { reason: "plan_completed", message: "All tasks are complete. The agent should provide a final summary." },
    });
    const summarised = decideNow(
      state({ tasks: done, session: { id: "s-1", goal: "Goal", finalSummary: "All good" } }),
    );
    expect(summarised).toMatchObject({
      now: { reason: "plan_completed", message: "The session is complete." },
      session: { final_summary: "All good" },
    });
    expect(decideNow(state({ runStatus: "cancelled" })).now).toMatchObject({
      reason: "plan_completed",
      agent_instructions: expect.stringContaining("cancelled"),
    });
  });
});
