import fs from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { expect, test } from "@playwright/test";
import {
  planCompletedSchema,
  planValidationFailedSchema,
  readyForTaskSchema,
  sessionCreatedSchema,
  successSchema,
  syncInstructionsSchema,
  waitingOnSignalSchema,
} from "../server/agents/contract";
import { RunViewPage } from "./pages/run-pages";
import { trpc } from "./pages/trpc-api";
import { stepwiseCli as cli } from "./run-node";

/**
 * Seed 003 Part 1, end to end: the built `stepwise` executable, run as a subprocess from the
 * agent's workspace, finds the test server through its server.json and drives a whole session,
 * while a person watches the run live in the browser and clears a blocker.
 */
/** Runs a `--json` command: stdout must be exactly one JSON document. */
async function json(cwd: string, ...args: string[]): Promise<{ code: number | null; body: unknown }> {
  const result = await cli(cwd, ...args);
  let body: unknown;
  try {
    body = JSON.parse(result.stdout);
  } catch {
    throw new Error(`not JSON on stdout (exit ${result.code}): ${result.stdout}\n${result.stderr}`);
  }
  return { code: result.code, body };
}

test("an agent runs a whole session through the CLI while a person watches and steers it in the browser", async ({
  page,
  request,
}) => {
  test.setTimeout(120_000);
  const workspace = await fs.mkdtemp(path.join(os.tmpdir(), "stepwise-agent-ws-"));
  try {
    await fs.mkdir(path.join(workspace, "src/models"), { recursive: true });
    await fs.writeFile(path.join(workspace, "spec.md"), "# Spec\n## Database Schema\n## User API\n");
    await fs.writeFile(path.join(workspace, "src/models/user.py"), "class User: pass\n");

    // An agent works only in a directory a person registered: before that, start is refused.
    const refused = await json(workspace, "start", "--goal", "Implement the features described in spec.md", "--json");
    expect(refused.code).not.toBe(0);
    expect(JSON.stringify(refused.body)).toContain("not a registered workspace");
    await trpc(request, "workspaces.register", { path: await fs.realpath(workspace) });

    // Step 1: kick-off.
    const started = await json(workspace, "start", "--goal", "Implement the features described in spec.md", "--json");
    expect(started.code).toBe(0);
    const session = sessionCreatedSchema.parse(started.body);
    expect(session.next_command).toBe("stepwise status --json");

    // Step 2: the instruction sync; the agent writes its docs/agents.md.
    const sync = syncInstructionsSchema.parse((await json(workspace, "status", "--json")).body);
    await fs.mkdir(path.join(workspace, "docs"));
    await fs.writeFile(path.join(workspace, "docs/agents.md"), sync.now.instructions_content);

    // A person opens the session's run.
    const list = await request.get("/api/trpc/agents.list");
    const sessions = (await list.json()).result.data.json as { id: string; runId: string }[];
    const runId = sessions.find((s) => s.id === session.session_id)!.runId;
    const run = new RunViewPage(page);
    await run.open(runId);
    await expect(page.getByRole("region", { name: "Agent session" })).toContainText(session.session_id);
    await run.expectStepStatus("step_1", "awaiting_agent");
    await expect(run.step("step_1").getByTestId("agent-state")).toHaveText("Waiting for an agent to take it.");

    // Step 3: the decomposition meta-task.
    const meta = readyForTaskSchema.parse((await json(workspace, "status", "--json")).body);
    expect(meta.now.current_task).toMatchObject({ id: 1, status: "TODO" });

    // A plan failing the gates is rejected with actionable details (exit 1), and changes nothing.
    const rejected = await json(
      workspace,
      "update",
      "--json",
      JSON.stringify({
        add_tasks: [{ title: "Create login endpoint", type: "feature", context_hints: ["Use `src/api/utils.py`."] }],
      }),
    );
    expect(rejected.code).toBe(1);
    expect(planValidationFailedSchema.parse(rejected.body).details).toEqual([
      "Task 'Create login endpoint' is missing the `relevant_file_paths` field: list the files the task will read or change.",
      "Task 'Create login endpoint' has a hint pointing to a non-existent file: `src/api/utils.py`.",
    ]);

    const accepted = await json(
      workspace,
      "update",
      "--json",
      JSON.stringify({
        add_tasks: [
          {
            title: "Set up database schema",
            type: "feature",
            context_hints: [
              "Read the 'Database Schema' section in `spec.md`.",
              "Review existing models in `src/models/` for conventions.",
            ],
            relevant_file_paths: ["spec.md", "src/models/user.py"],
          },
          {
            title: "Create API endpoints for users",
            type: "feature",
            context_hints: ["Refer to the 'User API' section of `spec.md` for required fields."],
            relevant_file_paths: ["spec.md"],
            dependencies: [2],
          },
        ],
        update_tasks: [{ id: 1, status: "DONE" }],
      }),
    );
    expect(accepted.code).toBe(0);
    expect(successSchema.parse(accepted.body)).toEqual({ status: "success", message: "State updated successfully." });

    // The browser follows: the new tasks appear, task 2 waits for the agent.
    await run.expectStepStatus("step_1", "completed");
    await run.expectStepStatus("step_2", "awaiting_agent");
    await run.expectStepStatus("step_3", "pending");

    // Step 4: the loop.
    const task2 = readyForTaskSchema.parse((await json(workspace, "status", "--json")).body);
    expect(task2.now.current_task).toMatchObject({
      id: 2,
      title: "Set up database schema",
      context_hints: [
        "Read the 'Database Schema' section in `spec.md`.",
        "Review existing models in `src/models/` for conventions.",
      ],
    });
    expect((await json(workspace, "update", "--json", '{"update_tasks":[{"id":2,"status":"IN_PROGRESS"}]}')).code).toBe(
      0,
    );
    await run.expectStepStatus("step_2", "running");
    await expect(run.step("step_2").getByTestId("agent-state")).toHaveText("e2e-agent is working on it.");

    // The agent hits a problem and raises a blocker; status holds it until a person clears it.
    const alert = await cli(
      workspace,
      "alert",
      "--id",
      "test_failure",
      "--task",
      "2",
      "--message",
      "test_user_creation fails",
    );
    expect(alert.code).toBe(0);
    expect(alert.stdout).toContain("Signal 'test_failure' raised.");
    const held = waitingOnSignalSchema.parse((await json(workspace, "status", "--json")).body);
    expect(held.signal).toEqual({
      id: "test_failure",
      task_id: 2,
      level: "blocker",
      message: "test_user_creation fails",
    });
    const signal = page.locator('[data-signal-id="test_failure"]');
    await expect(signal).toContainText("test_user_creation fails");
    await run.expectRunStatus("paused");
    await signal.getByRole("button", { name: "Clear signal test_failure" }).click();
    await expect(signal).toHaveCount(0);
    await run.expectRunStatus("running");
    expect(readyForTaskSchema.parse((await json(workspace, "status", "--json")).body).now.current_task.id).toBe(2);

    expect(
      (await json(workspace, "update", "--json", '{"update_tasks":[{"id":2,"status":"DONE","notes":"schema added"}]}'))
        .code,
    ).toBe(0);
    await run.expectStepStatus("step_2", "completed");
    await run.expectStepStatus("step_3", "awaiting_agent");
    expect(readyForTaskSchema.parse((await json(workspace, "status", "--json")).body).now.current_task.id).toBe(3);
    expect((await json(workspace, "update", "--json", '{"update_tasks":[{"id":3,"status":"DONE"}]}')).code).toBe(0);

    // Plan complete, then the final summary.
    planCompletedSchema.parse((await json(workspace, "status", "--json")).body);
    await run.expectRunStatus("completed");
    expect(
      (await json(workspace, "update", "--json", '{"final_summary":"Schema and user endpoints implemented."}')).code,
    ).toBe(0);
    const done = planCompletedSchema.parse((await json(workspace, "status", "--json")).body);
    expect(done.session.final_summary).toBe("Schema and user endpoints implemented.");
    await page.reload();
    await expect(page.getByTestId("final-summary")).toContainText("Schema and user endpoints implemented.");

    // Human output without --json, and a refused update's exit code and message.
    const human = await cli(workspace, "status");
    expect(human.code).toBe(0);
    expect(human.stdout).toContain(`Session ${session.session_id}: plan completed`);
    const late = await cli(workspace, "update", "--json", '{"update_tasks":[{"id":3,"status":"TODO"}]}');
    expect(late.code).toBe(1);
    expect(JSON.parse(late.stdout)).toMatchObject({ status: "error", error_type: "invalid_state" });
  } finally {
    await fs.rm(workspace, { recursive: true, force: true });
  }
});

test("the CLI says how to start a server when none answers, and refuses bad usage with exit 2", async () => {
  const cwd = os.tmpdir();
  const missing = await cli(cwd, "status", "--json", "--server", "http://127.0.0.1:9");
  expect(missing.code).toBe(3);
  expect(JSON.parse(missing.stdout)).toMatchObject({ status: "error", error_type: "server_unreachable" });
  expect(JSON.parse(missing.stdout).message).toContain("npm start");
  const usage = await cli(cwd, "alert", "--id", "x");
  expect(usage.code).toBe(2);
  expect(usage.stderr).toContain("needs --id and --message");
  const badJson = await cli(cwd, "update", "--json", "{nope");
  expect(badJson.code).toBe(2);
  const help = await cli(cwd, "update", "--help");
  expect(help.code).toBe(0);
  expect(help.stdout).toContain("stepwise update --json");
});
