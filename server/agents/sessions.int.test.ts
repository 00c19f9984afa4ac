import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { startHarness, type Harness } from "../../tests/app-harness";
import { readEvents } from "../events/store";
import { agentAlert, agentStart, agentStatus, agentSuggest, agentUpdate } from "../operations/agent";
import type { Identity } from "../identity";
import { invokeOperation, type Operation } from "../operations/operation";
import {
  planCompletedSchema,
  planValidationFailedSchema,
  readyForTaskSchema,
  sessionCreatedSchema,
  successSchema,
  syncInstructionsSchema,
  waitingOnSignalSchema,
  waitingSchema,
} from "./contract";
import { AGENT_INSTRUCTIONS } from "./instructions";
import { enterPlanMode, submitPlan, submitPlanInput } from "../planner/plan-mode";
import { startScriptedLlm } from "../../tests/scripted-llm";
import { readPlannerConfig } from "../planner/config";
import { createPlannerDeps, installPlanner } from "../planner/deps";
import type { z } from "zod";

/** The whole seed 003 loop through the operations layer, on a real database with a real worker. */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const AGENT: Identity = { kind: "agent", name: "agent-7" };

function call<I extends z.ZodType, O extends z.ZodType>(operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity: AGENT }, input);
}

async function setUpWorkspace(root: string) {
  await fs.mkdir(path.join(root, "src/models"), { recursive: true });
  await fs.writeFile(path.join(root, "spec.md"), "# Spec\n## Database Schema\nusers(id, name)\n");
  await fs.writeFile(path.join(root, "src/models/user.py"), "class User: pass  # TODO: add password hash\n");
}

const schemaTask = {
  title: "Set up database schema",
  type: "feature",
  context_hints: [
    "Read the 'Database Schema' section in `spec.md`.",
    "Review existing models in `src/models/` for conventions.",
  ],
  relevant_file_paths: ["spec.md", "src/models/user.py"],
};

async function statusOf() {
  return call(agentStatus, {});
}

async function waitForStatus(reason: string, timeoutMs = 60_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const status = await statusOf();
    if (status.now.reason === reason) return status;
    if (Date.now() > deadline) throw new Error(`status is still ${JSON.stringify(status)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

describe("agent sessions (seed 003)", () => {
  it("update_tasks edits any field of an open task through the same gates, in one new version", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    sessionCreatedSchema.parse(await call(agentStart, { goal: "Implement user authentication" }));
    await statusOf();
    await statusOf();
    const endpoints = {
      title: "Create API endpoints for users",
      type: "feature",
      context_hints: ["Refer to the 'User API' section of `spec.md`."],
      relevant_file_paths: ["spec.md"],
    };
    successSchema.parse(
      await call(agentUpdate, {
        payload: { add_tasks: [schemaTask, endpoints], update_tasks: [{ id: 1, status: "DONE" }] },
      }),
    );

    // Task 3 now waits for task 2, gets better hints and a file it will create; no status changes.
    successSchema.parse(
      await call(agentUpdate, {
        payload: {
          update_tasks: [
            {
              id: 3,
              title: "Create the users API",
              dependencies: [2],
              context_hints: ["Create `src/api/users.py` following `src/models/user.py`."],
              relevant_file_paths: ["src/api/users.py", "spec.md"],
            },
          ],
        },
      }),
    );
    const status = readyForTaskSchema.parse(await statusOf());
    expect(status.plan.tasks.find((task) => task.id === 3)).toMatchObject({
      title: "Create the users API",
      status: "TODO",
      dependencies: [2],
      context_hints: ["Create `src/api/users.py` following `src/models/user.py`."],
      relevant_file_paths: ["src/api/users.py", "spec.md"],
      type: "feature",
    });
    const versions = await harness.app.db.prisma.planVersion.findMany({ orderBy: { version: "asc" } });
    expect(versions.at(-1)!.changeNote).toBe("agent-7 edited 1 task");

    // The gates an added task passes: a vague hint, a missing file, a cycle — each refused whole.
    const before = versions.length;
    const vague = planValidationFailedSchema.parse(
      await call(agentUpdate, { payload: { update_tasks: [{ id: 2, context_hints: ["stuff"] }] } }),
    );
    expect(vague.details).toEqual([expect.stringContaining('has a hint that is not actionable: "stuff"')]);
    const missing = planValidationFailedSchema.parse(
      await call(agentUpdate, { payload: { update_tasks: [{ id: 2, relevant_file_paths: ["nope.py"] }] } }),
    );
    expect(missing.details).toEqual([
      expect.stringContaining("lists a non-existent file in `relevant_file_paths`: `nope.py`"),
    ]);
    const cycle = planValidationFailedSchema.parse(
      await call(agentUpdate, { payload: { update_tasks: [{ id: 2, dependencies: [3] }] } }),
    );
    expect(cycle.details.join(" ")).toContain("Circular dependency: step_3 → step_2");
    expect(await harness.app.db.prisma.planVersion.count()).toBe(before);

    // A settled task is history, and an item that changes nothing is a clear error.
    await expect(
      call(agentUpdate, { payload: { update_tasks: [{ id: 1, title: "Rewrite history" }] } }),
    ).rejects.toMatchObject({
      code: "invalid_state",
      message: expect.stringContaining("Task 1 is settled"),
    });
    await expect(
      call(agentUpdate, { payload: { update_tasks: [{ id: 2, notes: "just a note" }] } }),
    ).rejects.toMatchObject({
      code: "invalid_input",
    });
  });

  it("an edited task whose definition a person approved waits for a new approval", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    const entered = await enterPlanMode(harness.app, { reason: "Two tasks", actor: AGENT.name });
    const submitted = await submitPlan(harness.app, {
      sessionId: entered.planning_session_id,
      actor: AGENT.name,
      ...submitPlanInput.parse({
        summary: "Schema, then models",
        steps: [
          { description: "Write the schema from `spec.md`", relevant_file_paths: ["spec.md"] },
          { description: "Update the user model", relevant_file_paths: ["src/models/user.py"] },
        ],
      }),
    });
    await harness.caller.plans.approve({ planId: submitted.plan_id, version: submitted.version });
    const first = readyForTaskSchema.parse(await waitForStatus("ready_for_task"));
    expect(first.now.current_task.id).toBe(1);

    // The person approved task 2 as it was: edited, it needs their approval again.
    successSchema.parse(
      await call(agentUpdate, {
        payload: { update_tasks: [{ id: 2, context_hints: ["Edit `src/models/user.py` to add password_hash."] }] },
      }),
    );
    await call(agentUpdate, { payload: { update_tasks: [{ id: 1, status: "DONE" }] } });
    const waiting = waitingSchema.parse(await waitForStatus("waiting"));
    expect(waiting.now.waiting_for).toEqual([expect.objectContaining({ task_id: 2, state: "awaiting_approval" })]);
    const { runId } = (await harness.app.db.pool.query('select run_id as "runId" from agent_sessions')).rows[0];
    await harness.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    expect(readyForTaskSchema.parse(await waitForStatus("ready_for_task")).now.current_task.id).toBe(2);
  });

  it("runs a whole session: sync, decomposition, gated add_tasks, the task loop, plan_completed, final summary", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    const created = sessionCreatedSchema.parse(await call(agentStart, { goal: "Implement user authentication" }));
    expect(created.session_id).toMatch(/^implement-user-authentication-\d{10}$/);
    expect(created.next_command).toBe("stepwise status --json");

    // Response A first, then never again for this session.
    const sync = syncInstructionsSchema.parse(await statusOf());
    expect(sync.now.instructions_content).toBe(AGENT_INSTRUCTIONS);
    expect(sync.session).toEqual({ id: created.session_id, goal: "Implement user authentication" });

    // The decomposition meta-task.
    const meta = readyForTaskSchema.parse(await statusOf());
    expect(meta.now.current_task).toMatchObject({ id: 1, status: "TODO", executor: "agent" });
    expect(meta.now.current_task.title).toBe(
      "Decompose the goal 'Implement user authentication' into a detailed task list for Stepwise.",
    );

    // A submission failing the gates is rejected whole, with one actionable detail per problem.
    const rejected = planValidationFailedSchema.parse(
      await call(agentUpdate, {
        payload: {
          add_tasks: [
            {
              title: "Add password_hash to User model",
              type: "feature",
              context_hints: ["Edit `src/models/user.py`."],
            },
            {
              title: "Create login endpoint",
              type: "feature",
              context_hints: ["Use `src/api/utils.py` for helpers.", "stuff"],
              relevant_file_paths: ["src/api/login.py"],
              dependencies: [4, 99],
            },
            { title: "No type", context_hints: [], relevant_file_paths: ["spec.md"], dependencies: [3] },
          ],
          update_tasks: [{ id: 1, status: "DONE" }],
        },
      }),
    );
    expect(rejected.details).toEqual(
      expect.arrayContaining([
        "Task 'Add password_hash to User model' is missing the `relevant_file_paths` field: list the files the task will read or change.",
        "Task 'Create login endpoint' has a hint pointing to a non-existent file: `src/api/utils.py`.",
        "Task 'Create login endpoint' lists a non-existent file in `relevant_file_paths`: `src/api/login.py`.",
        expect.stringContaining("Task 'Create login endpoint' has a hint that is not actionable: \"stuff\""),
        "Task 'Create login endpoint' depends on task 99, which does not exist in the plan.",
        expect.stringContaining("Task 'No type' is missing the `type` field"),
        expect.stringContaining("Task 'No type' is missing the `context_hints` field"),
        expect.stringContaining("The dependencies form a cycle: task 3 → task 4 → task 3"),
      ]),
    );
    // Nothing of the rejected update was applied: task 1 is still the agent's, the plan unchanged.
    const still = readyForTaskSchema.parse(await statusOf());
    expect(still.now.current_task.id).toBe(1);
    expect(still.plan.tasks).toHaveLength(1);

    // A valid submission: two tasks, the second after the first, and task 1 DONE.
    expect(
      successSchema.parse(
        await call(agentUpdate, {
          payload: {
            add_tasks: [
              schemaTask,
              {
                title: "Create API endpoints for users",
                type: "feature",
                context_hints: ["Refer to the 'User API' section of `spec.md` for required fields."],
                relevant_file_paths: ["spec.md"],
                dependencies: [2],
              },
            ],
            update_tasks: [{ id: 1, status: "DONE", notes: "Decomposed into 2 tasks" }],
          },
        }),
      ),
    ).toEqual({ status: "success", message: "State updated successfully." });

    // The same update again (an agent retrying after a lost answer) adds nothing twice.
    await call(agentUpdate, { payload: { add_tasks: [schemaTask], update_tasks: [{ id: 1, status: "DONE" }] } });

    const task2 = readyForTaskSchema.parse(await statusOf());
    expect(task2.now.current_task).toMatchObject({
      id: 2,
      title: "Set up database schema",
      type: "feature",
      status: "TODO",
      dependencies: [],
      context_hints: schemaTask.context_hints,
      relevant_file_paths: schemaTask.relevant_file_paths,
    });
    expect(task2.plan.tasks.map((task) => [task.id, task.status])).toEqual([
      [1, "DONE"],
      [2, "TODO"],
      [3, "TODO"],
    ]);

    // Task 3 is not the agent's yet: its dependency is not done.
    await expect(call(agentUpdate, { payload: { update_tasks: [{ id: 3, status: "DONE" }] } })).rejects.toMatchObject({
      code: "invalid_state",
      message: expect.stringContaining("Task 3 cannot become DONE: it waits for its dependencies (Task 2)"),
    });

    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    const inProgress = readyForTaskSchema.parse(await statusOf());
    expect(inProgress.now.current_task).toMatchObject({ id: 2, status: "IN_PROGRESS", state: "running" });
    // Repeating an update (a retry after a lost answer) is not an error.
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE", notes: "schema.sql written" }] } });
    expect(readyForTaskSchema.parse(await statusOf()).now.current_task.id).toBe(3);

    // A final summary is refused while work is open.
    await expect(call(agentUpdate, { payload: { final_summary: "done" } })).rejects.toMatchObject({
      code: "invalid_state",
    });
    await call(agentUpdate, { payload: { update_tasks: [{ id: 3, status: "DONE" }] } });

    const completed = planCompletedSchema.parse(await statusOf());
    expect(completed.now.message).toBe("All tasks are complete. The agent should provide a final summary.");
    await call(agentUpdate, { payload: { final_summary: "Schema and endpoints implemented." } });
    const closed = planCompletedSchema.parse(await statusOf());
    expect(closed.session.final_summary).toBe("Schema and endpoints implemented.");
    await expect(call(agentUpdate, { payload: { update_tasks: [{ id: 3, status: "TODO" }] } })).rejects.toMatchObject({
      code: "invalid_state",
    });

    // The run is an ordinary run: the agent's work is in its events, with who did it.
    const { runId } = (await harness.app.db.pool.query('select run_id as "runId" from agent_sessions')).rows[0];
    const run = await harness.waitForRun(runId, ["completed"]);
    expect(run.steps.map((step) => [step.stepId, step.status])).toEqual([
      ["step_1", "completed"],
      ["step_2", "completed"],
      ["step_3", "completed"],
    ]);
    expect(run.steps[1]!.result?.value).toEqual({ doneBy: "agent-7", note: "schema.sql written" });
    const events = await readEvents(harness.app.db.pool, runId, 0);
    expect(events.filter((e) => e.stepId === "step_2").map((e) => e.type)).toEqual([
      "step.awaiting_agent",
      // status handed the task to the agent under a lease, then the agent started it.
      "agent.task_leased",
      "step.running",
      "step.completed",
    ]);
  });

  it("a failing tool step after the agent's task raises a blocker; fixing and clearing it runs the step again", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    const { session_id } = await call(agentStart, { goal: "Add a health check" });
    await statusOf(); // sync
    await call(agentUpdate, {
      payload: {
        add_tasks: [{ ...schemaTask, title: "Write the health check" }],
        update_tasks: [{ id: 1, status: "DONE" }],
      },
    });
    // A person adds a check the engine runs after the agent's task (it fails until healthy.txt exists).
    const session = (
      await harness.app.db.pool.query("select plan_id, run_id from agent_sessions where id = $1", [session_id])
    ).rows[0];
    const { plan } = await harness.caller.plans.get({ planId: session.plan_id });
    await harness.caller.plans.edit({
      planId: plan.id,
      baseVersion: plan.version,
      edit: {
        kind: "addStep",
        position: 2,
        step: {
          tool: "read_file",
          title: "Run the health check test",
          type: "test",
          args: { path: "healthy.txt" },
          dependsOn: ["step_2"],
        },
      },
    });
    const withCheck = readyForTaskSchema.parse(await statusOf());
    expect(withCheck.plan.tasks.map((task) => [task.id, task.executor])).toEqual([
      [1, "agent"],
      [2, "agent"],
      [3, "stepwise"],
    ]);
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });

    const blocked = waitingOnSignalSchema.parse(await waitForStatus("waiting_on_signal"));
    expect(blocked.signal).toMatchObject({ id: "test_failure_3", task_id: 3, level: "blocker" });
    expect(blocked.signal.message).toContain("Task 3 (Run the health check test) failed");
    expect(blocked.now.message).toBe("Waiting for signal 'test_failure_3' on task 3 to be cleared.");

    // The agent fixes the cause and clears the signal: the check runs again and passes.
    await fs.writeFile(path.join(harness.workspace, "healthy.txt"), "ok");
    const cleared = await call(agentAlert, { alert: { clear: "test_failure_3" } });
    expect(cleared.message).toBe("Signal 'test_failure_3' cleared. Task 3 runs again.");
    planCompletedSchema.parse(await waitForStatus("plan_completed"));
    const run = await harness.waitForRun(session.run_id, ["completed"]);
    expect(run.steps.find((step) => step.stepId === "step_3")).toMatchObject({ status: "completed", attempt: 2 });
    await expect(call(agentAlert, { alert: { clear: "test_failure_3" } })).rejects.toMatchObject({ code: "not_found" });
  });

  it("a blocker raised with alert holds the session (and its run) until cleared; warnings do not", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    const { session_id } = await call(agentStart, { goal: "Refactor models" });
    await statusOf();
    await call(agentAlert, { alert: { id: "lint", level: "warning", message: "3 lint warnings" } });
    expect((await statusOf()).now.reason).toBe("ready_for_task");
    await call(agentAlert, { alert: { id: "ci_red", level: "blocker", message: "CI is red on main", task_id: 1 } });
    const held = waitingOnSignalSchema.parse(await statusOf());
    expect(held.signal).toEqual({ id: "ci_red", task_id: 1, level: "blocker", message: "CI is red on main" });
    const runId = (await harness.app.db.pool.query("select run_id from agent_sessions where id = $1", [session_id]))
      .rows[0].run_id;
    expect((await harness.caller.runs.get({ runId })).status).toBe("paused");
    await call(agentAlert, { alert: { clear: "ci_red" } });
    expect((await statusOf()).now.reason).toBe("ready_for_task");
    expect((await harness.caller.runs.get({ runId })).status).toBe("running");
    await expect(
      call(agentAlert, { alert: { id: "x", level: "blocker", message: "m", task_id: 42 } }),
    ).rejects.toMatchObject({
      code: "not_found",
    });
  });

  it("waits while a person must approve a gated step, and CANCELLED tasks do not hold up the plan", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    const { session_id } = await call(agentStart, { goal: "Clean up" });
    await statusOf();
    await call(agentUpdate, {
      payload: {
        add_tasks: [schemaTask, { ...schemaTask, title: "Optional polish", type: "chore" }],
        update_tasks: [{ id: 1, status: "DONE" }],
      },
    });
    const { plan_id, run_id } = (
      await harness.app.db.pool.query("select plan_id, run_id from agent_sessions where id = $1", [session_id])
    ).rows[0];
    // A person gates task 2 in the browser: the agent is not handed it until approved.
    const { plan } = await harness.caller.plans.get({ planId: plan_id });
    await harness.caller.plans.edit({
      planId: plan_id,
      baseVersion: plan.version,
      edit: { kind: "updateStep", stepId: "step_2", changes: { approvalRequired: true } },
    });
    // The run adopts the person's edit at once: the live view shows task 2 waiting for approval.
    const adopted = await harness.caller.runs.get({ runId: run_id });
    expect(adopted.planVersion).toBe(plan.version + 1);
    expect(adopted.steps.find((step) => step.stepId === "step_2")?.status).toBe("awaiting_approval");
    const next = readyForTaskSchema.parse(await statusOf());
    expect(next.now.current_task.id).toBe(3);
    await call(agentUpdate, { payload: { update_tasks: [{ id: 3, status: "CANCELLED", notes: "not needed" }] } });
    const waiting = waitingSchema.parse(await statusOf());
    expect(waiting.now.message).toBe("Waiting for a person to approve a step.");
    expect(waiting.now.waiting_for).toEqual([
      { task_id: 2, title: "Set up database schema", state: "awaiting_approval" },
    ]);
    await expect(call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } })).rejects.toMatchObject({
      message: expect.stringContaining("it waits for a person's approval"),
    });
    await harness.caller.runs.decide({ runId: run_id, stepId: "step_2", approve: true });
    expect(readyForTaskSchema.parse(await statusOf()).now.current_task.id).toBe(2);
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });
    expect((await statusOf()).now.reason).toBe("plan_completed");
  });

  it("suggest proposes TODO markers as tasks, leaving out what the plan already has", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    await call(agentStart, { goal: "Tidy up" });
    const { suggestions } = await call(agentSuggest, {});
    expect(suggestions).toEqual([
      expect.objectContaining({
        title: expect.stringContaining("src/models/user.py:1"),
        relevant_file_paths: ["src/models/user.py"],
        type: "chore",
      }),
    ]);
    // Added as a task, the same suggestion is not offered again.
    await statusOf();
    await call(agentUpdate, { payload: { add_tasks: [{ ...suggestions[0]!, dependencies: [] }] } });
    expect((await call(agentSuggest, {})).suggestions).toEqual([]);
  });

  it("suggest on a fresh project offers nothing from Stepwise's own rulebook, which the loop wrote there", async () => {
    harness = await startHarness();
    await call(agentStart, { goal: "Start a project" });
    // The loop's first status asks the agent to write the instructions; the agent does.
    expect((await statusOf()).now.reason).toBe("sync_instructions");
    await fs.mkdir(path.join(harness.workspace, "docs"), { recursive: true });
    await fs.writeFile(path.join(harness.workspace, "docs", "agents.md"), AGENT_INSTRUCTIONS);
    expect(AGENT_INSTRUCTIONS).toContain("TODO");
    expect((await call(agentSuggest, {})).suggestions).toEqual([]);
  });

  it("with the judge configured, tasks that pass the gates also need its approval (seed 003 P-2)", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    const llm = await startScriptedLlm();
    try {
      installPlanner(
        harness.app,
        createPlannerDeps(
          harness.app,
          readPlannerConfig({
            STEPWISE_LLM_BASE_URL: llm.baseUrl,
            STEPWISE_LLM_MODELS: "scripted-planner",
            STEPWISE_PLANNER_JUDGE: "on",
            STEPWISE_PLANNER_RETRIES: "0",
          }),
        ),
      );
      await call(agentStart, { goal: "Judge me" });
      await statusOf();
      llm.script(
        { json: { is_approved: false, feedback: "Split the schema task: it has two responsibilities." } },
        { json: { is_approved: true, feedback: "Fine." } },
      );
      const rejected = planValidationFailedSchema.parse(
        await call(agentUpdate, { payload: { add_tasks: [schemaTask] } }),
      );
      expect(rejected.details).toEqual([
        "The reviewing judge rejected the tasks: Split the schema task: it has two responsibilities.",
      ]);
      expect(JSON.stringify(llm.requests[0]!.messages)).toContain("Set up database schema");
      expect(readyForTaskSchema.parse(await statusOf()).plan.tasks).toHaveLength(1);
      // Tasks that fail the objective gates never reach the judge.
      planValidationFailedSchema.parse(await call(agentUpdate, { payload: { add_tasks: [{ title: "x" }] } }));
      expect(llm.requests).toHaveLength(1);
      expect(await call(agentUpdate, { payload: { add_tasks: [schemaTask] } })).toEqual({
        status: "success",
        message: "State updated successfully.",
      });
      expect(llm.requests).toHaveLength(2);
    } finally {
      await llm.close();
    }
  });

  it("refuses bad input before changing anything", async () => {
    harness = await startHarness();
    await setUpWorkspace(harness.workspace);
    await expect(call(agentStatus, {})).rejects.toMatchObject({
      code: "not_found",
      message: expect.stringContaining("stepwise start"),
    });
    await expect(call(agentStart, { goal: "  " })).rejects.toMatchObject({ code: "invalid_input" });
    await expect(call(agentStart, { goal: "x", workspace: "relative/dir" })).rejects.toMatchObject({
      code: "invalid_input",
    });
    await expect(call(agentStart, { goal: "x", workspace: "/definitely/not/here" })).rejects.toMatchObject({
      code: "invalid_input",
    });
    for (const system of ["/", "/etc", "/usr/lib"]) {
      await expect(call(agentStart, { goal: "x", workspace: system })).rejects.toMatchObject({ code: "forbidden" });
    }
    await call(agentStart, { goal: "Something" });
    await expect(call(agentUpdate, { payload: {} })).rejects.toMatchObject({ code: "invalid_input" });
    await expect(
      call(agentUpdate, { payload: { update_tasks: [{ id: 1, status: "FINISHED" }] } }),
    ).rejects.toMatchObject({
      code: "invalid_input",
    });
    await expect(
      call(agentUpdate, { payload: { add_tasks: [{ ...schemaTask, relevant_file_paths: ["../../etc/passwd"] }] } }),
    ).resolves.toMatchObject({
      error_type: "plan_validation_failed",
      details: [expect.stringContaining("../../etc/passwd")],
    });
    const sessions = await harness.app.db.pool.query("select count(*)::int as n from agent_sessions");
    expect(sessions.rows[0].n).toBe(1);
  });
});
