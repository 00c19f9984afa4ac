import { randomBytes } from "node:crypto";
import fsSync from "node:fs";
import fs from "node:fs/promises";
import path from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import type { z } from "zod";
import { reportsIntegrated, startHarness, type Harness } from "../../tests/app-harness";
import { agentStart, agentStatus, agentUpdate } from "../operations/agent";
import type { Identity } from "../identity";
import { invokeOperation, type Operation } from "../operations/operation";
import { runCancel } from "../operations/runs";
import { cancelRun, skipStep } from "../engine/engine";
import { enterPlanMode } from "../planner/plan-mode";
import fc from "fast-check";
import {
  readyForTaskSchema,
  successSchema,
  waitingOnSignalSchema,
  waitingSchema,
  type AgentTaskView,
} from "./contract";
import { resendStalledReports } from "./task-reports";
import { addCredential, addPrincipal, revokeCredential, setRole } from "../people/principals";
import { withCaller } from "../caller-context";
import { integrationBranch, runShort, taskBranch } from "./worktrees";
import { worktreeWorkSettled } from "./worktrees-ahead";
import { git } from "../../tests/git-fixture";
import { processesIn } from "../../tests/processes-in";

/**
 * A worktree per agent task, on a real git repository as the workspace, through the operations
 * layer with a real database and worker: parallel tasks in their own worktrees and branches,
 * merges in dependency order into the run's integration branch, a conflict as a blocker signal
 * naming the file and resolved in the worktree, a failing verifier sending the task back to TODO
 * with findings while its dependent waits, and cancel removing the run's worktrees.
 */
let harness: Harness | undefined;
afterEach(async () => {
  await harness?.close();
  harness = undefined;
});

const AGENT: Identity = { kind: "agent", name: "agent-7" };

function call<I extends z.ZodType, O extends z.ZodType>(operation: Operation<I, O>, input: unknown) {
  return invokeOperation(operation, { app: harness!.app, identity: AGENT }, input);
}

/** A git repository with three files as the session's workspace. */
async function gitRepositoryWorkspace(root: string): Promise<void> {
  await fs.mkdir(path.join(root, "src"), { recursive: true });
  await fs.writeFile(path.join(root, "src/shared.txt"), "one\ntwo\nthree\n");
  await fs.writeFile(path.join(root, "src/a.txt"), "a\n");
  await fs.writeFile(path.join(root, "src/b.txt"), "b\n");
  git(root, "init", "--quiet", "--initial-branch=main");
  git(root, "add", "--all");
  git(root, "commit", "--quiet", "--message=initial");
}

const task = (title: string, paths: string[], extra: object = {}) => ({
  title,
  type: "feature",
  context_hints: [`Edit \`${paths[0]}\` as the title says.`],
  relevant_file_paths: paths,
  ...extra,
});

async function currentTask(): Promise<AgentTaskView> {
  return readyForTaskSchema.parse(await call(agentStatus, {})).now.current_task;
}

/** The tasks' engine states, by task number. */
async function taskStates(): Promise<Record<number, string>> {
  const rows = await harness!.app.db.pool.query<{ step_id: string; status: string }>(
    "select step_id, status from run_steps",
  );
  return Object.fromEntries(rows.rows.map((row) => [Number(row.step_id.slice(5)), row.status]));
}

async function startSessionWithTasks(tasks: object[]): Promise<{ runId: string; root: string }> {
  harness = await startHarness();
  await gitRepositoryWorkspace(harness.workspace);
  const root = await fs.realpath(harness.workspace);
  await call(agentStart, { goal: "Change the sample files in parallel" });
  await call(agentStatus, {}); // instructions sync
  const meta = await currentTask();
  const { runId } = (await harness.app.db.pool.query<{ runId: string }>('select run_id as "runId" from agent_sessions'))
    .rows[0]!;
  // The decomposition task, too, is handed out with a worktree of its own.
  expect(meta.working_directory).toBe(path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_1`));
  successSchema.parse(
    await call(agentUpdate, { payload: { add_tasks: tasks, update_tasks: [{ id: 1, status: "DONE" }] } }),
  );
  await reportsIntegrated(harness.app.db.pool);
  return { runId, root };
}

/** Holds the run's merge lock (task-integration.ts) until `release`: a DONE's merge waits for it. */
async function holdMerges(runId: string): Promise<{ release(): Promise<void> }> {
  const client = await harness!.app.db.pool.connect();
  await client.query("select pg_advisory_lock(hashtext($1))", [`stepwise-worktrees:${runId}`]);
  return {
    async release() {
      await client.query("select pg_advisory_unlock(hashtext($1))", [`stepwise-worktrees:${runId}`]);
      client.release();
    },
  };
}

/** The command lines of the processes working in `dir` (a verifier's `sleep 300`, a git). */
function commandsIn(dir: string): string[] {
  return processesIn(dir).flatMap((pid) => {
    try {
      return [fsSync.readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim()];
    } catch {
      return [];
    }
  });
}

/** The error each finished integration of task 2's report ended with (null: it ended the report), oldest first. */
async function finishReportErrors(): Promise<unknown[]> {
  const rows = await harness!.app.db.pool.query<{ error: unknown }>(
    `select error from agent_workspace_calls
      where kind = 'finish_report' and step_id = 'step_2' and finished_at is not null order by created_at`,
  );
  return rows.rows.map((row) => row.error);
}

/** The report events (task-reports.ts) of the run's task 2, oldest first. */
async function reportEvents(runId: string): Promise<{ type: string; data: unknown }[]> {
  const rows = await harness!.app.db.pool.query<{ type: string; data: unknown }>(
    `select type, data from events
      where stream_id = $1 and step_id = 'step_2' and type in ('task.reported', 'task.report_ended') order by seq`,
    [runId],
  );
  return rows.rows;
}

describe("a worktree per agent task", () => {
  it("runs parallel tasks in their own worktrees, merges them in order, and turns a conflict into a blocker until resolved", async () => {
    const { runId, root } = await startSessionWithTasks([
      task("Change a and the shared line", ["src/a.txt", "src/shared.txt"]),
      task("Change b and the shared line", ["src/b.txt", "src/shared.txt"]),
      { ...task("Use both changes", ["src/a.txt"]), dependencies: [2, 3] },
    ]);
    const integration = integrationBranch(runId);
    const base = git(root, "rev-parse", integration).trim();

    // Tasks 2 and 3 may run at once: each in its own worktree, on its own branch, from the integration branch.
    const task2 = await currentTask();
    expect(task2.id).toBe(2);
    await call(agentUpdate, {
      payload: {
        update_tasks: [
          { id: 2, status: "IN_PROGRESS" },
          { id: 3, status: "IN_PROGRESS" },
        ],
      },
    });
    const wt2 = task2.working_directory!;
    const wt3 = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_3`);
    expect(wt2).toBe(path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_2`));
    const listed = git(root, "worktree", "list", "--porcelain");
    expect(listed).toContain(`worktree ${wt2}\nHEAD ${base}\nbranch refs/heads/${taskBranch(runId, "step_2")}`);
    expect(listed).toContain(`worktree ${wt3}\nHEAD ${base}\nbranch refs/heads/${taskBranch(runId, "step_3")}`);
    // The person's own checkout does not see Stepwise's worktrees.
    expect(git(root, "status", "--porcelain")).toBe("");

    await fs.writeFile(path.join(wt2, "src/a.txt"), "a from task 2\n");
    await fs.writeFile(path.join(wt2, "src/shared.txt"), "one\ntwo from task 2\nthree\n");
    await fs.writeFile(path.join(wt3, "src/b.txt"), "b from task 3\n");
    await fs.writeFile(path.join(wt3, "src/shared.txt"), "one\ntwo from task 3\nthree\n");

    // Task 2 DONE: its work is committed and merged (off the call); its worktree and branch go.
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE", notes: "a changed" }] } });
    await reportsIntegrated(harness!.app.db.pool);
    expect(git(root, "show", `${integration}:src/a.txt`)).toBe("a from task 2\n");
    await worktreeWorkSettled(); // the removal runs after the call
    expect(git(root, "worktree", "list", "--porcelain")).not.toContain(wt2);
    expect(git(root, "branch", "--list", taskBranch(runId, "step_2")).trim()).toBe("");
    const afterTask2 = git(root, "rev-parse", integration).trim();

    // Task 3 DONE: the same line changed on both sides — the merge is aborted, a blocker names the file.
    expect(await call(agentUpdate, { payload: { update_tasks: [{ id: 3, status: "DONE" }] } })).toEqual({
      status: "success",
      message: expect.stringContaining("Task 3 is reported DONE: Stepwise is committing, checking and merging it"),
    });
    await reportsIntegrated(harness!.app.db.pool);
    const blocked = waitingOnSignalSchema.parse(await call(agentStatus, {}));
    expect(blocked.signal).toMatchObject({ id: "merge_conflict_3", level: "blocker", task_id: 3 });
    expect(blocked.signal.message).toContain("src/shared.txt");
    expect(git(root, "rev-parse", integration).trim()).toBe(afterTask2);
    const integrationCheckout = path.join(root, `.stepwise/worktrees/${runShort(runId)}-integration`);
    expect(git(integrationCheckout, "status", "--porcelain")).toBe("");
    expect(await taskStates()).toMatchObject({ 3: "running", 4: "pending" });

    // The agent resolves it in its worktree and reports DONE again: the merge goes through.
    expect(() => git(wt3, "merge", "--quiet", integration)).toThrow();
    await fs.writeFile(path.join(wt3, "src/shared.txt"), "one\ntwo from tasks 2 and 3\nthree\n");
    git(wt3, "add", "src/shared.txt");
    git(wt3, "commit", "--quiet", "--no-edit");
    await call(agentUpdate, { payload: { update_tasks: [{ id: 3, status: "DONE" }] } });
    await reportsIntegrated(harness!.app.db.pool);
    const task4 = await currentTask();
    expect(task4.id).toBe(4);
    expect(git(root, "show", `${integration}:src/shared.txt`)).toBe("one\ntwo from tasks 2 and 3\nthree\n");
    expect(git(root, "show", `${integration}:src/b.txt`)).toBe("b from task 3\n");
    // In dependency order on the integration branch: task 2's work, then task 3's merge.
    const log = git(root, "log", "--first-parent", "--format=%s", `${base}..${integration}`).trim().split("\n");
    expect(log).toEqual(["Merge Task 3: Change b and the shared line", "Merge Task 2: Change a and the shared line"]);
    // Never rewritten: what the integration branch held after task 2 is still in its history.
    git(root, "merge-base", "--is-ancestor", afterTask2, integration);
    // Task 4 starts from both merged results.
    expect(await fs.readFile(path.join(task4.working_directory!, "src/shared.txt"), "utf8")).toBe(
      "one\ntwo from tasks 2 and 3\nthree\n",
    );
    const signals = await harness!.app.db.pool.query("select 1 from signals where cleared_at is null");
    expect(signals.rowCount).toBe(0);
    // Cleared before the task's DONE is recorded, which could be the run's last event: a person's
    // live view stops following a finished run and would have kept showing the blocker.
    const order = await harness!.app.db.pool.query<{ type: string }>(
      `select type from events where stream_id = $1
         and ((type = 'signal.cleared' and data->>'id' = 'merge_conflict_3') or (type = 'step.completed' and step_id = 'step_3'))
       order by seq`,
      [runId],
    );
    expect(order.rows.map((row) => row.type)).toEqual(["signal.cleared", "step.completed"]);

    // The last task done, the run completes and leaves no worktree behind: only the person's own
    // checkout is listed; the integration branch, which holds the merged work, stays.
    successSchema.parse(await call(agentUpdate, { payload: { update_tasks: [{ id: 4, status: "DONE" }] } }));
    await expect
      .poll(
        async () =>
          (await harness!.app.db.pool.query<{ status: string }>("select status from runs where id = $1", [runId]))
            .rows[0]?.status,
        { timeout: 60_000 },
      )
      .toBe("completed");
    await reportsIntegrated(harness!.app.db.pool);
    await worktreeWorkSettled();
    const remaining = git(root, "worktree", "list", "--porcelain")
      .split("\n")
      .filter((line) => line.startsWith("worktree "));
    expect(remaining).toEqual([`worktree ${root}`]);
    expect(git(root, "branch", "--list", integration).trim()).not.toBe("");
  });

  it("sends a task whose verifier fails back to TODO with the findings, holding its dependent", async () => {
    const { runId, root } = await startSessionWithTasks([
      task("Mark a as fixed", ["src/a.txt"], {
        acceptance: ["src/a.txt says fixed"],
        verify: ["grep -q fixed src/a.txt"],
      }),
      { ...task("Build on the fix", ["src/a.txt"]), dependencies: [2] },
    ]);
    // A verifier is a shell command: where no sandbox can hold it to read-only, the task has a gate.
    if ((await taskStates())[2] === "awaiting_approval") {
      await harness!.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    }
    const task2 = await currentTask();
    expect(task2).toMatchObject({ id: 2, acceptance: ["src/a.txt says fixed"], verify: ["grep -q fixed src/a.txt"] });
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(task2.working_directory!, "src/a.txt"), "still broken\n");

    expect(await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } })).toMatchObject({
      message: expect.stringContaining("A failed check sends it back as TODO with the findings"),
    });
    await reportsIntegrated(harness!.app.db.pool);
    const back = await currentTask();
    expect(back).toMatchObject({ id: 2, status: "TODO" });
    expect(back.findings).toContain("`grep -q fixed src/a.txt` exited with code 1");
    expect(await taskStates()).toMatchObject({ 2: "awaiting_agent", 3: "pending" });
    // Nothing merged: the integration branch does not have the broken change.
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a\n");

    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(back.working_directory!, "src/a.txt"), "fixed\n");
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });
    await reportsIntegrated(harness!.app.db.pool);
    expect((await currentTask()).id).toBe(3);
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("fixed\n");
    const verified = await harness!.app.db.pool.query<{ data: { passed: boolean } }>(
      "select data from events where stream_id = $1 and type = 'task.verified' order by seq",
      [runId],
    );
    expect(verified.rows.map((row) => row.data.passed)).toEqual([false, true]);
  });

  it("answers a DONE before its merge: the task is merging, nobody's to take, and what it makes ready has its worktree when handed out", async () => {
    const { runId, root } = await startSessionWithTasks([
      task("Change a", ["src/a.txt"]),
      { ...task("Build on a", ["src/a.txt"]), dependencies: [2] },
    ]);
    const task2 = await currentTask();
    expect(task2.id).toBe(2);
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(task2.working_directory!, "src/a.txt"), "a from task 2\n");

    // While the merge cannot run, the DONE is answered all the same: reported, not yet DONE.
    const merges = await holdMerges(runId);
    try {
      expect(await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE", notes: "a" }] } })).toEqual({
        status: "success",
        message: expect.stringContaining("Task 2 is reported DONE"),
      });
      const waiting = waitingSchema.parse(await call(agentStatus, {}));
      expect(waiting.now.waiting_for).toContainEqual({ task_id: 2, title: "Change a", state: "merging" });
      expect(waiting.now.retry_after_seconds).toBe(1);
      expect(waiting.now.message).toContain("merging task 2");
      // A person's run page says so too: the snapshot, and the event its live view follows.
      const shown = (await harness!.caller.runs.get({ runId })).steps.find((step) => step.stepId === "step_2");
      expect(shown).toMatchObject({ status: "running", waiting: { kind: "agent", agent: AGENT.name, merging: true } });
      expect(await reportEvents(runId)).toEqual([{ type: "task.reported", data: { agent: AGENT.name } }]);
      // Another agent is not handed the task being merged, nor its dependent.
      const other = { kind: "agent", name: "agent-8" } as const;
      const otherStatus = await invokeOperation(agentStatus, { app: harness!.app, identity: other }, {});
      expect(waitingSchema.parse(otherStatus).now.reason).toBe("waiting");
      // A retried DONE (its answer lost) is the same report; carrying on with the task is refused.
      await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE", notes: "a" }] } });
      const reports = await harness!.app.db.pool.query("select step_id from agent_task_reports");
      expect(reports.rows).toEqual([{ step_id: "step_2" }]);
      await expect(
        call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } }),
      ).rejects.toMatchObject({ code: "invalid_state" });
      // Its lease does not run out while it is merged: nobody else could redo it.
      await harness!.app.db.pool.query("update agent_task_leases set expires_at = now() - interval '1 second'");
      waitingSchema.parse(await call(agentStatus, {}));
      expect(await taskStates()).toMatchObject({ 2: "running", 3: "pending" });
      expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a\n");
    } finally {
      await merges.release();
    }

    await reportsIntegrated(harness!.app.db.pool);
    expect(await taskStates()).toMatchObject({ 2: "completed", 3: "awaiting_agent" });
    expect((await reportEvents(runId)).map((event) => event.data)).toEqual([
      { agent: AGENT.name },
      { outcome: "recorded" },
    ]);
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a from task 2\n");
    // Task 3's worktree was made from the merged work before task 3 became ready.
    const wt3 = path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_3`);
    expect(await fs.readFile(path.join(wt3, "src/a.txt"), "utf8")).toBe("a from task 2\n");
    expect(await currentTask()).toMatchObject({ id: 3, working_directory: wt3 });
  });

  it.each([
    { who: "an agent whose credential is revoked", reporter: AGENT, ownCredential: false },
    {
      who: "an agent whose credential it reported with is revoked, another still live",
      reporter: AGENT,
      ownCredential: true,
    },
    {
      who: "a reviewer demoted to viewer",
      reporter: { kind: "person", name: "rita", role: "reviewer" } as Identity,
      ownCredential: false,
    },
  ])("asks the reporter's authority again at the merge: $who after the DONE merges nothing", async (example) => {
    const { runId, root } = await startSessionWithTasks([task("Change a", ["src/a.txt"])]);
    const pool = harness!.app.db.pool;
    // The people changes as an admin makes them (the audit log holds them to that).
    const asAdmin = <T>(work: () => Promise<T>) => withCaller({ kind: "person", name: "user" }, work);
    const added = await asAdmin(() =>
      addPrincipal(pool, {
        kind: example.reporter.kind === "agent" ? "agent" : "person",
        name: example.reporter.name,
        ...(example.reporter.role && { role: example.reporter.role }),
        createdBy: "user",
      }),
    );
    // Reporting under a named credential of its own, while a second one stays live.
    if (example.ownCredential) await asAdmin(() => addCredential(pool, added.principalId, "user"));
    const reporter: Identity = example.ownCredential
      ? { ...example.reporter, tokenId: added.credentialId }
      : example.reporter;
    const asReporter = <I extends z.ZodType, O extends z.ZodType>(operation: Operation<I, O>, input: unknown) =>
      invokeOperation(operation, { app: harness!.app, identity: reporter }, input);
    const task2 = await currentTask();
    await asReporter(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(task2.working_directory!, "src/a.txt"), "a from task 2\n");

    const merges = await holdMerges(runId);
    try {
      // Allowed when reported; no longer by the time the merge could run.
      expect(await asReporter(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } })).toMatchObject({
        message: expect.stringContaining("Task 2 is reported DONE"),
      });
      await asAdmin(async () => {
        if (reporter.kind === "agent") await revokeCredential(pool, added.credentialId, "user");
        else await setRole(pool, added.principalId, "viewer", "user");
      });
    } finally {
      await merges.release();
    }
    await reportsIntegrated(pool);
    expect(await taskStates()).toMatchObject({ 2: "running" });
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a\n");
    const signals = await pool.query<{ key: string; level: string; message: string }>(
      "select key, level, message from signals where cleared_at is null",
    );
    expect(signals.rows).toEqual([expect.objectContaining({ key: "report_refused_step_2", level: "warning" })]);
    expect(signals.rows[0]!.message).toContain("nothing was merged");
    // The run page no longer shows it merging: the report ended, dropped.
    expect((await reportEvents(runId)).at(-1)).toEqual({
      type: "task.report_ended",
      data: { outcome: "dropped", reason: expect.stringContaining("the reporter was refused") },
    });
    const shown = (await harness!.caller.runs.get({ runId })).steps.find((step) => step.stepId === "step_2");
    expect(shown?.waiting).not.toHaveProperty("merging");
  });

  it("merges a reported DONE exactly when, at the merge, its reporter, run and task still allow it, whatever changed between", async () => {
    /*
     * A small model of the promise for a DONE integrated off the call: random changes between the
     * report and its merge (the merge held meanwhile), the outcome predicted from the state at the
     * merge alone — the reporting credential live, a person still a reviewer, an agent not back in
     * plan mode, the run not cancelled, the task not skipped — and compared with what merged.
     */
    const CHANGES = [
      "revoke the reporting credential",
      "revoke another credential",
      "demote to viewer",
      "promote to reviewer",
      "enter plan mode",
      "cancel the run",
      "skip the task",
    ] as const;
    await fc.assert(
      fc.asyncProperty(
        fc.constantFrom("agent" as const, "person" as const),
        fc.array(fc.constantFrom(...CHANGES), { minLength: 1, maxLength: 4 }),
        async (kind, changes) => {
          await harness?.close();
          harness = undefined;
          const { runId, root } = await startSessionWithTasks([task("Change a", ["src/a.txt"])]);
          const app = harness!.app;
          const pool = app.db.pool;
          const asAdmin = <T>(work: () => Promise<T>) => withCaller({ kind: "person", name: "user" }, work);
          const name = kind === "agent" ? AGENT.name : "rita";
          const added = await asAdmin(() =>
            addPrincipal(pool, {
              kind,
              name,
              ...(kind === "person" && { role: "reviewer" as const }),
              createdBy: "user",
            }),
          );
          const other = await asAdmin(() => addCredential(pool, added.principalId, "user"));
          const reporter: Identity =
            kind === "agent"
              ? { kind, name, tokenId: added.credentialId }
              : { kind, name, role: "reviewer", tokenId: added.credentialId };
          const asReporter = (input: unknown) => invokeOperation(agentUpdate, { app, identity: reporter }, input);
          const task2 = await currentTask();
          await asReporter({ payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
          await fs.writeFile(path.join(task2.working_directory!, "src/a.txt"), "a from task 2\n");

          const state = { credential: true, reviewer: true, planMode: false, cancelled: false, skipped: false };
          const merges = await holdMerges(runId);
          try {
            await asReporter({ payload: { update_tasks: [{ id: 2, status: "DONE" }] } });
            for (const change of changes) {
              if (change === "revoke the reporting credential" && state.credential) {
                await asAdmin(() => revokeCredential(pool, added.credentialId, "user"));
                state.credential = false;
              } else if (change === "revoke another credential") {
                await asAdmin(() => revokeCredential(pool, other.credentialId, "user")).catch(() => undefined);
              } else if (kind === "person" && (change === "demote to viewer" || change === "promote to reviewer")) {
                state.reviewer = change === "promote to reviewer";
                await asAdmin(() => setRole(pool, added.principalId, state.reviewer ? "reviewer" : "viewer", "user"));
              } else if (kind === "agent" && change === "enter plan mode" && !state.planMode) {
                await enterPlanMode(app, { reason: "plan first", actor: name, credential: added.credentialId });
                state.planMode = true;
              } else if (change === "cancel the run" && !state.cancelled && !state.skipped) {
                // (Its one task skipped, the run is over: nothing is left to cancel.)
                await cancelRun(app.engine, { runId, actor: "tester" });
                state.cancelled = true;
              } else if (change === "skip the task" && !state.cancelled && !state.skipped) {
                await skipStep(app.engine, { runId, stepId: "step_2", actor: "tester" });
                state.skipped = (await taskStates())[2] === "skipped";
              }
            }
          } finally {
            await merges.release();
          }
          await reportsIntegrated(pool);

          const allowed =
            state.credential &&
            (kind === "person" ? state.reviewer : !state.planMode) &&
            !state.cancelled &&
            !state.skipped;
          const merged = git(root, "show", `${integrationBranch(runId)}:src/a.txt`) === "a from task 2\n";
          expect({ kind, changes, merged }).toEqual({ kind, changes, merged: allowed });
          expect((await taskStates())[2]).toBe(
            allowed ? "completed" : state.cancelled ? "cancelled" : state.skipped ? "skipped" : "running",
          );
        },
      ),
      // Each run is a whole session in a fresh repository (seconds): the cases named above it are
      // the fixed ones, this looks for the combination nobody named.
      { numRuns: 6 },
    );
  });

  it("integrates a report with no integration under way: the worker's sweep sends it again", async () => {
    const { runId, root } = await startSessionWithTasks([task("Change a", ["src/a.txt"])]);
    const task2 = await currentTask();
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(task2.working_directory!, "src/a.txt"), "a from task 2\n");
    // A report whose call is gone (failed, or its worker stopped and the row was purged): none under way.
    const { id: sessionId } = (await harness!.app.db.pool.query<{ id: string }>("select id from agent_sessions"))
      .rows[0]!;
    await harness!.app.db.pool.query(
      `insert into agent_task_reports (session_id, step_id, run_id, actor, actor_kind, operation, note, reported_at)
       values ($1, 'step_2', $2, $3, 'agent', $4, 'a', now() - interval '1 minute')`,
      [
        sessionId,
        runId,
        AGENT.name,
        JSON.stringify({ name: agentUpdate.name, callers: agentUpdate.callers, role: agentUpdate.role }),
      ],
    );
    expect(waitingSchema.parse(await call(agentStatus, {})).now.waiting_for).toContainEqual(
      expect.objectContaining({ task_id: 2, state: "merging" }),
    );
    // Sent again once: by this call, or by the worker's own sweep when its tick came first.
    await resendStalledReports(harness!.app, harness!.app.engine.localWorker!.workerId!);
    await reportsIntegrated(harness!.app.db.pool);
    expect(await finishReportErrors()).toEqual([null]);
    expect(await taskStates()).toMatchObject({ 2: "completed" });
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a from task 2\n");
    // A report whose integration is under way is not sent twice.
    expect(await resendStalledReports(harness!.app, harness!.app.engine.localWorker!.workerId!)).toBe(0);
  });

  it("stops a reported DONE's integration when the run is cancelled: its verifier ends, nothing is merged", async () => {
    const { runId, root } = await startSessionWithTasks([
      task("Change a", ["src/a.txt"], { acceptance: ["checked at length"], verify: ["sleep 300"] }),
    ]);
    if ((await taskStates())[2] === "awaiting_approval") {
      await harness!.caller.runs.decide({ runId, stepId: "step_2", approve: true });
    }
    const task2 = await currentTask();
    const worktree = task2.working_directory!;
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(worktree, "src/a.txt"), "a from task 2\n");
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });
    // The verifier runs in the task's worktree (not the commit's git before it); the person cancels the run meanwhile.
    await expect.poll(() => commandsIn(worktree).includes("sleep 300"), { timeout: 60_000, interval: 50 }).toBe(true);
    await harness!.caller.runs.cancel({ runId });

    await reportsIntegrated(harness!.app.db.pool);
    await expect.poll(() => processesIn(worktree), { timeout: 10_000 }).toEqual([]);
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a\n");
    expect((await reportEvents(runId)).at(-1)).toEqual({
      type: "task.report_ended",
      data: { outcome: "dropped", reason: "the run was cancelled" },
    });
    // Ended by the integration the cancel stopped, not left for the sweep to send again.
    expect(await finishReportErrors()).toEqual([null]);
    // Nothing of the stopped check is recorded as a finding: the task was not judged.
    const verified = await harness!.app.db.pool.query(
      "select 1 from events where stream_id = $1 and type = 'task.verified' and step_id = 'step_2'",
      [runId],
    );
    expect(verified.rowCount).toBe(0);
  });

  it("ends a reported DONE whose merge a cancel cut short as cancelled, at once, not as a failure to try again", async () => {
    const { runId, root } = await startSessionWithTasks([task("Change a", ["src/a.txt"])]);
    const task2 = await currentTask();
    const worktree = task2.working_directory!;
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    await fs.writeFile(path.join(worktree, "src/a.txt"), "a from task 2\n");
    // Enough to hash that the commit and merge are still at work when the cancel removes the worktree.
    await fs.writeFile(path.join(worktree, "src/data.bin"), randomBytes(48 * 1024 * 1024));
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "DONE" }] } });
    await expect
      .poll(() => commandsIn(worktree).some((line) => line.includes("git")), { timeout: 60_000, interval: 20 })
      .toBe(true);
    await harness!.caller.runs.cancel({ runId });

    await reportsIntegrated(harness!.app.db.pool);
    expect(git(root, "show", `${integrationBranch(runId)}:src/a.txt`)).toBe("a\n");
    expect((await reportEvents(runId)).at(-1)).toEqual({
      type: "task.report_ended",
      data: { outcome: "dropped", reason: "the run was cancelled" },
    });
    // Whatever the removed worktree made git answer, the stop ended the report on this integration.
    expect(await finishReportErrors()).toEqual([null]);
  });

  it("removes the run's worktrees when the run is cancelled, and only those", async () => {
    const { runId, root } = await startSessionWithTasks([
      task("Change a", ["src/a.txt"]),
      task("Change b", ["src/b.txt"]),
    ]);
    // A worktree of the person's own, which Stepwise must leave alone.
    const own = path.join(root, "..", `${path.basename(root)}-own`);
    git(root, "worktree", "add", "--quiet", "-b", "mine", own);
    await call(agentUpdate, {
      payload: {
        update_tasks: [
          { id: 2, status: "IN_PROGRESS" },
          { id: 3, status: "IN_PROGRESS" },
        ],
      },
    });
    expect(git(root, "worktree", "list", "--porcelain")).toContain(`${runShort(runId)}-step_3`);

    await call(runCancel, { runId });
    const listed = git(root, "worktree", "list", "--porcelain");
    expect(listed).not.toContain(".stepwise/worktrees");
    expect(listed).toContain(`worktree ${own}`);
    await expect(fs.stat(path.join(root, `.stepwise/worktrees/${runShort(runId)}-step_2`))).rejects.toThrow();
    // The branches stay: unmerged work is never deleted.
    expect(git(root, "branch", "--list", "stepwise/*").trim().split("\n")).toHaveLength(3);
    git(root, "worktree", "remove", "--force", own);
  });

  it("removes worktrees a cancel left behind when the next session starts in the workspace", async () => {
    const { runId, root } = await startSessionWithTasks([task("Change a", ["src/a.txt"])]);
    await call(agentUpdate, { payload: { update_tasks: [{ id: 2, status: "IN_PROGRESS" }] } });
    // Cancelled by a path that does not clean up (the engine directly, as if the process stopped after).
    await cancelRun(harness!.app.engine, { runId, actor: "tester" });
    expect(git(root, "worktree", "list", "--porcelain")).toContain(`${runShort(runId)}-step_2`);

    await call(agentStart, { goal: "Another go" });
    expect(git(root, "worktree", "list", "--porcelain")).not.toContain(".stepwise/worktrees");
  });
});
